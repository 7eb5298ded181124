#!/usr/bin/env bash
# Work on a lent GPU machine (an H100 or H200; docs/CUDA.md, "On a lent GPU"), within its limits:
# about 30 minutes, in commands of at most 10 minutes that follow each other closely (the machine
# goes back 30 s after a call ends), nothing fetched there, at most 8 files of 16 MiB back, and
# $OUT emptied before each call. One lease is three calls of at most 9 minutes:
#
#   1. tools/gpu/lease.sh build train-start test           GPU targets; trainer; the GPU suite
#   2. tools/gpu/lease.sh sanitize train-end bench         untimed checks while it trains; stop
#                                                          it, score it; then the timings
#   3. tools/gpu/lease.sh profile softmax pack             ncu; the paper's Table 1 on the GPU;
#                                                          everything back in at most 8 files
# TRAIN_ARGS adds to the trainer's flags; by default it trains at a GPU's pace: batch 512, the
# rate and warm-up scaled from batch 64's (--ref-batch), bf16 autocast, the blocked attention at
# 128 positions, torch.compile and a fused AdamW where the torch there has them.
#
# Steps (in the order given; their output goes to stdout and to /tmp/lease/log):
#   build          build-gpu/: Release, sm_90 (CUDA_ARCH), the carried deps, the GPU targets only
#   train-start    tools/train.py from models/mnist (or .gpu/init/) in its own session (setsid:
#                  it outlives the call), logging to /tmp/lease/train.log, checkpointing every
#                  minute to /tmp/lease/train.pt; TRAIN_MINUTES (20) at most
#   test           the GPU suite (ctest -L gpu, test_cuda and test_kernels in full)
#   sanitize       compute-sanitizer memcheck and racecheck over the GPU tests
#   train-end      stop the trainer (it checkpoints on SIGTERM: weights, averaged weights,
#                  optimizer, step), export both weights and score them
#   bench          tarnn bench in every precision and state format at batch 4,096, 16,384 and
#                  what fits; sample -n 10000 timed; bench --complete; score timed. Refuses to
#                  run while a trainer does: timings beside it mean nothing
#   profile        ncu over two steps per precision and state format at batch 4,096, its window
#                  the kernels a step's graph holds (bench's kernels_per_step)
#   softmax        the paper's softmax baseline on the GPU (tools/gpu/softmax_baseline.py)
#   pack           $OUT: results.tgz (logs, JSON, CSV) and the checkpoint in 15 MiB parts, at
#                  most 8 files (cat train.pt.part-* > .gpu/train.pt: the next lease resumes it);
#                  were it more than 7 parts, the two exported weights' parts instead
#
# DRY=1 runs every step without a GPU: each command is printed, not run, where it needs the GPU
# or would take minutes; the tools it calls are checked to exist and to accept the flags given
# (tests/tools/lease_dry_run.sh, in CI).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/tarnn-lease}
L=${LEASE_DIR:-/tmp/lease} # kept between the calls of one lease (the machine stays up)
DRY=${DRY:-}
mkdir -p "$OUT" "$L"
exec > >(tee -a "$L/log") 2>&1 # the call's output comes back as it is; $L/log goes in pack
T=build-gpu/tarnn
PY=${PY:-python3}
t0=$(date +%s)
say() { echo "== [$(($(date +%s) - t0)) s] $*"; }
# run CMD...: CMD, or with DRY=1 the line it would run
run() { if [ -n "$DRY" ]; then echo "dry: $*"; else "$@"; fi; }
precisions="fp32 tf32 bf16"
states="fp32 fp16"

if [ ! -d data/mnist ] && [ -f .gpu/mnist.tgz ]; then mkdir -p data && tar xzf .gpu/mnist.tgz -C data; fi

training() { [ -f "$L/train.pid" ] && kill -0 "$(cat "$L/train.pid")" 2>/dev/null; }

step_build() {
  run nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  local deps=$PWD/.gpu/deps/usr py
  py=$(command -v "$PY")
  say "configure"
  run cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90-real}" -DCMAKE_PREFIX_PATH="$deps" \
    -DTARNN_TORCH_PYTHON="$py" -DPython_EXECUTABLE="$py" -DTARNN_PYTHON=OFF -DTARNN_SERVE=OFF
  say "build: the command, the plugin and the GPU tests only"
  run cmake --build build-gpu -j16 --target tarnn tarnn_cuda test_cuda test_kernels test_state
  say "built"
}

step_train_start() {
  local init=models/mnist minutes=${TRAIN_MINUTES:-20}
  [ -f .gpu/init/model.safetensors ] && init=.gpu/init
  [ -f .gpu/train.pt ] && [ ! -f "$L/train.pt" ] && cp .gpu/train.pt "$L/train.pt" # resume
  say "training from $init (or $L/train.pt) for at most $minutes minutes, in its own session"
  local cmd=("$PY" tools/train.py --init-from "$init" --train data/mnist/train-images-idx3-ubyte
    --heldout data/mnist/valid-images-idx3-ubyte --ckpt "$L/train.pt" --ckpt-minutes 1
    --minutes "$minutes" --time-decay 0.5 --ema 0.999 --eval-every 500 --eval-images 1000
    ${TRAIN_ARGS:---batch 512 --ref-batch 64 --lr 1.5e-4 --warmup 200 --chunk 128 --compile})
  if [ -n "$DRY" ]; then
    run "${cmd[@]}"
    "$PY" tools/train.py --help >/dev/null # the flags above are checked by the dry-run test
    return
  fi
  PYTHONUNBUFFERED=1 setsid "${cmd[@]}" >"$L/train.log" 2>&1 </dev/null &
  echo $! >"$L/train.pid"
}

step_test() {
  say "the GPU suite"
  run ctest --test-dir build-gpu -L gpu --timeout 400 --output-on-failure >"$L/tests.log" 2>&1
  local tc=build-gpu/tests/test_cuda tk=build-gpu/tests/test_kernels
  say "the GPU suites in full"
  { run env TARNN_KERNELS=cuda "$tk"; run "$tc"; run build-gpu/tests/test_state; } >>"$L/tests.log" 2>&1
  grep -E "max error|identical|FAILED|PASSED|tests passed" "$L/tests.log" | tail -40
}

step_sanitize() {
  local tc=build-gpu/tests/test_cuda tk=build-gpu/tests/test_kernels
  for tool in ${TOOLS:-memcheck racecheck}; do
    say "compute-sanitizer --tool $tool"
    run timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 9 "$tc" \
      --gtest_filter='CudaParity.SmallGolden:CudaParity.Masked*:CudaMemory.*:CudaPrefill.*' 2>&1 | tail -8
    run env TARNN_KERNELS=cuda timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$tk" 2>&1 | tail -5
  done
}

step_train_end() {
  say "stopping the trainer (it checkpoints on SIGTERM)"
  if training; then
    kill -TERM "$(cat "$L/train.pid")"
    while training; do sleep 1; done
  fi
  [ -f "$L/train.log" ] && tail -20 "$L/train.log"
  for kind in ema raw; do
    local flag=""
    [ $kind = ema ] && flag=--ema
    run "$PY" tools/export.py "$L/train.pt" --out "$L/m-$kind" $flag
  done
  say "test bits/dim of the averaged and the last weights (engine, cuda, fp32)"
  for kind in ema raw; do
    run $T score --device cuda --model "$L/m-$kind" --images data/mnist/test-images-idx3-ubyte \
      --quiet --json-file "$L/score-$kind.json"
  done
  run "$PY" tools/train.py --eval-only --use-ema --ckpt "$L/train.pt" --batch 250 \
    --heldout data/mnist/test-images-idx3-ubyte
}

bench() { # ARGS...: one timed run, appended to bench.jsonl
  if training; then
    echo "lease.sh: a trainer is running: stop it (train-end) before anything is timed" >&2
    return 1
  fi
  echo "-- tarnn bench $*"
  rm -f "$L/b.json"
  run timeout 150 $T bench --device cuda "$@" --quiet --json-file "$L/b.json" | tail -2
  [ -f "$L/b.json" ] && cat "$L/b.json" >>"$L/bench.jsonl"
  return 0
}

step_bench() {
  say "bench: every precision and state format"
  for p in $precisions; do
    for s in $states; do
      for b in 4096 16384 0; do bench --shape mnist --batch $b --precision $p --state $s || return 1; done
    done
  done
  bench --shape cifar10 --batch 4096 --steps 300 --precision bf16 --state fp16
  bench --complete --model models/mnist --precision bf16 --state fp16
  say "sample -n 10000 and score of the 10,000 test digits, timed"
  for s in $states; do
    run /usr/bin/time -v $T sample --device cuda --model models/mnist -n 10000 --seed 1 --state $s \
      --precision bf16 -o "$L/s-$s.png" 2>&1 | grep -E "images in|Elapsed|Maximum resident"
    run $T score --device cuda --model models/mnist --images data/mnist/test-images-idx3-ubyte \
      --state $s --quiet --json-file "$L/score-test-$s.json"
  done
}

step_profile() {
  if training; then echo "lease.sh: stop the trainer before profiling" >&2; return 1; fi
  for p in $precisions; do
    for s in $states; do
      # the window: two steps after two warm-up steps, from the graph's own kernel count
      local k=61
      if [ -z "$DRY" ]; then
        $T bench --device cuda --shape mnist --batch 4096 --steps 2 --precision $p --state $s \
          --quiet --json-file "$L/k.json" >/dev/null
        k=$("$PY" -c "import json; print(json.load(open('$L/k.json'))['kernels_per_step'])")
      fi
      say "ncu, $p GEMMs, $s state: $k kernels a step"
      run timeout 100 ncu --csv --launch-skip $((2 * k)) --launch-count $((2 * k)) \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
        $T bench --device cuda --shape mnist --batch 4096 --steps 4 --precision $p --state $s \
        --quiet >"$L/ncu-$p-$s.csv" 2>"$L/ncu.err"
    done
  done
}

step_softmax() {
  say "PyTorch on the GPU: softmax (KV cache) against linear (RNN form)"
  for b in 256 1024 4096; do run timeout 150 "$PY" tools/gpu/softmax_baseline.py --batch $b; done
}

step_pack() {
  say "pack: results.tgz and the checkpoint's parts"
  tar czf "$OUT/results.tgz" -C "$L" --ignore-failed-read log tests.log train.log bench.jsonl \
    $(cd "$L" && ls score-*.json ncu-*.csv 2>/dev/null) 2>/dev/null
  if [ -f "$L/train.pt" ]; then
    run split -b 15M -d "$L/train.pt" "$OUT/train.pt.part-"
    if [ "$(find "$OUT" -maxdepth 1 -name 'train.pt.part-*' | wc -l)" -gt 7 ]; then
      echo "the checkpoint is more than 7 parts: the exported weights instead (no optimizer)"
      rm -f "$OUT"/train.pt.part-*
      for kind in ema raw; do
        run split -b 15M -d "$L/m-$kind/model.safetensors" "$OUT/$kind.part-"
      done
    fi
  fi
  local n
  n=$(find "$OUT" -maxdepth 1 -type f | wc -l)
  echo "$n files in $OUT (at most 8)"
  [ "$n" -le 8 ]
}

while [ $# -gt 0 ]; do
  s=$1
  shift
  case $s in
    build) step_build || exit 1 ;;
    train-start) step_train_start ;;
    test) step_test ;;
    sanitize) step_sanitize ;;
    train-end) step_train_end ;;
    bench) step_bench ;;
    profile) step_profile ;;
    softmax) step_softmax ;;
    pack) step_pack ;;
    *) echo "lease.sh: unknown step $s" >&2; exit 2 ;;
  esac
done
say "done"
