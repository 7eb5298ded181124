#!/usr/bin/env bash
# What the emulated device is for, shown: each defect below planted in a scratch copy of this
# tree's HEAD, the emulated build (-DTARNN_CUDA_EMULATOR=ON) rebuilt, and the GPU suite run on it
# (ctest -L gpu, and test_emulator); a defect counts as caught when some test fails, and the
# tests that failed are named with the first line the emulated device or the test printed.
# Not part of CI: a rebuild and the suite per defect (minutes each).
#
#   tools/emulator_defects.sh [--sanitize] [SCRATCH]
#
# SCRATCH (default build-defects in this tree, which git ignores): where the copy (a detached git
# worktree) and its build go; kept between runs, so that a second run rebuilds only what a defect
# touches (`git worktree remove --force SCRATCH/tree` drops it). --sanitize: the build of CI's
# sanitizer pass (clang, AddressSanitizer and UBSan; its MNIST-size runs shortened).
# Exit 0 when every defect is caught.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
sanitize=0
[ "${1:-}" = --sanitize ] && { sanitize=1; shift; }
scratch=${1:-$src/build-defects} # in the tree: the compiler cache's paths match
copy=$scratch/tree
build=$copy/build-emulated$([ $sanitize -eq 1 ] && echo -sanitize)
jobs=$(nproc)

# name | file | the line as it is (a fixed string) | the line with the defect
defects=(
  "an index off by one in linear_attention.cu (the step kernel's output)|kernels/linear_attention.cu|  att[size_t(r) * A + h * d + j] =|  att[size_t(r) * A + h * d + j + 1] ="
  "a removed __syncthreads (the step kernel's, between phi and the walk)|kernels/linear_attention.cu|  __syncthreads(); // every thread reaches it: inactive ones only skip the work|  // (removed)"
  "a wrong leading dimension in one GEMM call (X's, one more than its rows)|src/cuda/gemm.cu|cublasLtMatrixLayoutCreate(&x, input, in, rows, in)|cublasLtMatrixLayoutCreate(\&x, input, in, rows, in + 1)"
  "shared memory sized one pair short (the step kernel's)|kernels/linear_attention.cu|  const size_t smem = size_t(G) * 3 * m.features * sizeof(float);|  const size_t smem = size_t(G - 1) * 3 * m.features * sizeof(float);"
)

say() { echo "emulator_defects: $*"; }
if [ ! -d "$copy" ]; then
  git -C "$src" worktree add --detach "$copy" HEAD >/dev/null || exit 1
fi
git -C "$copy" checkout --detach -q "$(git -C "$src" rev-parse HEAD)" && git -C "$copy" checkout -q -- .
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DTARNN_CUDA_EMULATOR=ON -DTARNN_PYTHON=OFF -DTARNN_SERVE=OFF)
if [ $sanitize -eq 1 ]; then
  cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang
              -DTARNN_FUZZ=ON -DTARNN_CUDA_EMULATOR=ON -DTARNN_SERVE=OFF)
fi
command -v ccache >/dev/null && cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$copy" -B "$build" "${cmake_args[@]}" >"$scratch/configure.log" 2>&1 ||
  { say "configure failed: $scratch/configure.log"; exit 1; }
targets=(tarnn tarnn_cuda test_cuda test_cuda_paths test_kernels test_emulator)

run_suite() { # LOG: the GPU suite; prints each failed test with the first line that says why
  ASAN_OPTIONS=detect_leaks=1 ctest --test-dir "$build" -L 'gpu|emulator' -j"$jobs" \
    --output-on-failure --output-junit "$1.xml" >"$1" 2>&1
  python3 - "$1.xml" <<'PY'
import re, sys, xml.etree.ElementTree as ET
failed = [t for t in ET.parse(sys.argv[1]).getroot().iter("testcase") if t.get("status") == "fail"]
for t in failed:
    out = "".join(t.itertext())
    why = re.search(r"^.*(tarnn emulated device:|ERROR: AddressSanitizer|FAIL:|error:).*$|"
                    r"^.*Failure\n.*\n.*\n.*$", out, re.M)  # a gtest failure: 3 lines more
    said = " / ".join(l.strip() for l in why.group(0).split("\n")) if why else "(see the log)"
    print(f"    caught by {t.get('name')}: {said[:300]}")
sys.exit(0 if failed else 1)
PY
}

say "the copy at $(git -C "$copy" rev-parse --short HEAD) without a defect first"
nice cmake --build "$build" -j"$jobs" --target "${targets[@]}" >"$scratch/build.log" 2>&1 ||
  { say "the unchanged copy does not build: $scratch/build.log"; exit 1; }
if run_suite "$scratch/clean.log"; then
  say "the GPU suite fails without a defect ($scratch/clean.log): nothing to show"; exit 1
fi
missed=0
for d in "${defects[@]}"; do
  IFS='|' read -r what file before after <<<"$d"
  git -C "$copy" checkout -q -- .
  if ! grep -qF -- "$before" "$copy/$file"; then
    say "$what: '$before' is no longer in $file"; missed=$((missed + 1)); continue
  fi
  python3 - "$copy/$file" "$before" "$after" <<'PY'
import sys
path, before, after = sys.argv[1:]
text = open(path).read()
open(path, "w").write(text.replace(before, after.replace("\\&", "&"), 1))
PY
  say "$what:"
  git -C "$copy" diff --unified=0 | grep '^[-+] ' | sed 's/^/    /'
  log="$scratch/$(echo "$what" | tr -c 'a-z0-9' '-' | cut -c1-40).log"
  if ! nice cmake --build "$build" -j"$jobs" --target "${targets[@]}" >"$log.build" 2>&1; then
    say "  does not build ($log.build)"; missed=$((missed + 1)); continue
  fi
  run_suite "$log" || { say "  NOT caught ($log)"; missed=$((missed + 1)); }
done
git -C "$copy" checkout -q -- .
say "$((${#defects[@]} - missed)) of ${#defects[@]} defects caught"
[ $missed -eq 0 ]
