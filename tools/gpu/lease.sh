#!/usr/bin/env bash
# Work on a lent GPU machine (an H100; docs/CUDA.md, "On a lent GPU"), within its limits: commands
# of at most 10 minutes, nothing fetched there, at most 8 files of 16 MiB back. What it needs
# travels in .gpu/ (ignored): deps/ (Debian's nlohmann-json3-dev, libcli11-dev, libstb-dev and
# libgtest-dev unpacked with dpkg -x) and mnist.tgz (data/mnist, made by tools/mnist_data.py).
#   tools/gpu/lease.sh STEP...   steps run in order; everything they print goes to $OUT/lease.log
#     train-start MIN   train from models/mnist (or .gpu/init/) for MIN minutes, in the background
#     build             build-gpu/: Release, sm_90, the carried deps
#     test              the whole ctest suite, GPU tests included; the GPU tests' and any failing
#                       test's whole output in $OUT/tests.log
#     sanitize          compute-sanitizer memcheck and racecheck over the GPU tests
#     train-end         wait for the training, score it (engine on the GPU, PyTorch fp32), and
#                       send the weights back as 15 MiB parts ($OUT/{ema,raw}.part-*)
#     bench             the sweep behind docs/CUDA.md's table ($OUT/bench.jsonl)
#     compare           the fused GEMM epilogue against TARNN_GEMM=unfused, interleaved
#     softmax           the paper's Table 1 on the GPU in PyTorch: KV-cache softmax against linear
#                       RNN form, same weights (tools/gpu/softmax_baseline.py)
#     profile           ncu over bench steps at batch 4,096 ($OUT/ncu.csv)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/tarnn-lease}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/lease.log") 2>&1
T=build-gpu/tarnn
t0=$(date +%s)
say() { echo "== [$(($(date +%s) - t0)) s] $*"; }

if [ ! -d data/mnist ] && [ -f .gpu/mnist.tgz ]; then mkdir -p data && tar xzf .gpu/mnist.tgz -C data; fi

step_train_start() {
  local init=models/mnist
  [ -f .gpu/init/model.safetensors ] && init=.gpu/init
  say "training from $init for $1 minutes"
  PYTHONUNBUFFERED=1 nohup python3 tools/train.py --init-from "$init" \
    --train data/mnist/train-images-idx3-ubyte --heldout data/mnist/valid-images-idx3-ubyte \
    --ckpt /tmp/gpu-train.pt --batch 64 --lr "${LR:-1.5e-4}" --warmup 200 --ema 0.999 --minutes "$1" \
    --time-decay 0.5 --eval-every 500 --eval-images 1000 --ckpt-minutes 1000 \
    >"$OUT/train.log" 2>&1 &
  echo $! >/tmp/gpu-train.pid
}

step_build() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  nvcc --version | tail -1
  local deps=$PWD/.gpu/deps/usr py
  py=$(command -v python3)
  say "configure"
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90-real \
    -DCMAKE_PREFIX_PATH="$deps" -DTARNN_TORCH_PYTHON="$py" -DPython_EXECUTABLE="$py" \
    -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" >/tmp/configure.log 2>&1 ||
    { tail -40 /tmp/configure.log; return 1; }
  grep "tarnn:" /tmp/configure.log
  say "build"
  cmake --build build-gpu -j16 >/tmp/build.log 2>&1 || { grep -B2 -A8 -m10 "error" /tmp/build.log; return 1; }
  say "built"
}

step_test() {
  say "ctest"
  ctest --test-dir build-gpu -j12 --timeout 400 --output-on-failure >"$OUT/tests.log" 2>&1
  grep -E "tests passed|Failed|\*\*\*|Skipped" "$OUT/tests.log" | tail -20
  local tc tk
  tc=$(find build-gpu -name test_cuda -type f | head -1)
  tk=$(find build-gpu -name test_kernels -type f | head -1)
  say "GPU suites in full"
  { TARNN_KERNELS=cuda "$tk"; "$tc"; } \
    >>"$OUT/tests.log" 2>&1
  grep -E "max error|identical|FAILED|PASSED" "$OUT/tests.log" | grep -E "cuda|identical|FAILED|PASSED" | tail -40
}

step_sanitize() {
  local tc tk
  tc=$(find build-gpu -name test_cuda -type f | head -1)
  tk=$(find build-gpu -name test_kernels -type f | head -1)
  for tool in ${TOOLS:-memcheck racecheck}; do
    say "compute-sanitizer --tool $tool"
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 "$tc" \
      --gtest_filter='CudaParity.SmallGolden:CudaParity.Masked*:CudaMemory.*' 2>&1 | tail -8
    echo "test_cuda under $tool: rc ${PIPESTATUS[0]}"
    TARNN_KERNELS=cuda timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 "$tk" 2>&1 | tail -5
    echo "test_kernels (cuda) under $tool: rc ${PIPESTATUS[0]}"
  done
}

step_train_end() {
  say "waiting for the training"
  while kill -0 "$(cat /tmp/gpu-train.pid)" 2>/dev/null; do sleep 2; done
  tail -25 "$OUT/train.log"
  # the averaged weights; with KEEP_RAW=1 the last ones too (4 parts: mind the 8 files back)
  for kind in ema ${KEEP_RAW:+raw}; do
    local flag=""
    [ $kind = ema ] && flag=--ema
    python3 tools/export.py /tmp/gpu-train.pt --out /tmp/m-$kind $flag | tail -1
    split -b 15M -d /tmp/m-$kind/model.safetensors "$OUT/$kind.part-"
  done
  say "test bits/dim, averaged weights (engine, cuda, fp32)"
  $T score --device cuda --model /tmp/m-ema --images data/mnist/test-images-idx3-ubyte --quiet | tail -2
  say "test bits/dim, averaged weights (PyTorch fp32)"
  python3 tools/train.py --eval-only --use-ema --ckpt /tmp/gpu-train.pt --batch 250 \
    --heldout data/mnist/test-images-idx3-ubyte
  python3 tools/train.py --eval-only --use-ema --ckpt /tmp/gpu-train.pt --batch 250 \
    --heldout data/mnist/valid-images-idx3-ubyte
  python3 tools/train.py --eval-only --ckpt /tmp/gpu-train.pt --batch 250 \
    --heldout data/mnist/valid-images-idx3-ubyte
}

bench() { # ARGS...
  echo "-- ${TARNN_GEMM:+TARNN_GEMM=$TARNN_GEMM }tarnn bench $*"
  rm -f /tmp/b.json
  timeout 120 $T bench --device cuda "$@" --quiet --json-file /tmp/b.json | tail -3
  cat /tmp/b.json >>"$OUT/bench.jsonl" 2>/dev/null
}

step_compare() { # the epilogue fusion against bias_act in its own kernel, interleaved
  say "fused epilogue against bias_act apart (TARNN_GEMM=unfused)"
  for r in 1 2; do
    for f in "" --tf32; do
      for b in 4096 16384; do
        bench --shape mnist --batch $b $f
        TARNN_GEMM=unfused bench --shape mnist --batch $b $f
      done
    done
  done
}

step_bench_quick() {
  say "bench (quick)"
  for f in "" --tf32; do
    for b in 4096 16384; do bench --shape mnist --batch $b $f; done
  done
}

step_bench() {
  say "bench"
  for p in fp32 tf32; do
    local f=""
    [ $p = tf32 ] && f=--tf32
    for b in 256 1024 4096 16384; do bench --shape mnist --batch $b $f; done
    bench --shape mnist $f --steps 100
    bench --shape cifar10 --batch 4096 $f --steps 300
  done
  say "sample -n 10000"
  /usr/bin/time -v $T sample --device cuda --model models/mnist -n 10000 --seed 1 -o /tmp/s.png 2>&1 |
    grep -E "sampled|wrote|Elapsed|Maximum resident"
}

step_softmax() {
  say "PyTorch on the GPU: softmax (KV cache) against linear (RNN form)"
  for b in 256 1024 4096; do timeout 150 python3 tools/gpu/softmax_baseline.py --batch $b; done
}

step_profile() {
  say "ncu, batch 4096, 2 positions"
  timeout 140 ncu --csv --launch-skip 60 --launch-count ${NCU_COUNT:-200} --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
    $T bench --device cuda --shape mnist --batch 4096 --steps 2 --quiet >"$OUT/ncu.csv" 2>/tmp/ncu.err
  echo "ncu rc $?: $(wc -l <"$OUT/ncu.csv") lines"; tail -3 /tmp/ncu.err
}

while [ $# -gt 0 ]; do
  s=$1
  shift
  case $s in
    train-start) step_train_start "$1"; shift ;;
    build) step_build || exit 1 ;;
    test) step_test ;;
    sanitize) step_sanitize ;;
    train-end) step_train_end ;;
    bench) step_bench ;;
    bench-quick) step_bench_quick ;;
    compare) step_compare ;;
    profile) step_profile ;;
    softmax) step_softmax ;;
    *) echo "lease.sh: unknown step $s" >&2; exit 2 ;;
  esac
done
say "done"
