#!/usr/bin/env bash
# Fuzz the file parsers (tests/fuzz: the safetensors/config loader, the IDX, .npy and PNG readers,
# the mask reader, sample --resume's record and partial .npy, and tarnn serve's request bodies)
# with libFuzzer under ASan+UBSan, for as long as asked:
#   tools/fuzz.sh [SECONDS] [loader|images|mask|resume|serve_request ...]  (default 600 s each, all)
# FUZZ_TIMEOUT=S: the seconds one input may take before it counts as a hang (default 10; more
# when the fuzzer shares a loaded machine).
# Builds build-fuzz (clang) first. New inputs go to build-fuzz/fuzz-corpus-NAME, findings (crash-*,
# leak-*, oom-*, timeout-*) to build-fuzz/findings-NAME/, and each run's log to
# build-fuzz/fuzz-NAME.log, whose last lines are libFuzzer's final figures (executions, coverage).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(loader images mask resume serve_request)
command -v clang++ >/dev/null || { echo "fuzz.sh: needs clang (Debian: clang libclang-rt-14-dev)" >&2; exit 2; }
# one configure and build at a time: two fuzz.sh side by side share build-fuzz/
mkdir -p build-fuzz
exec 9>build-fuzz/.build.lock
flock 9
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_COMPILER=clang -DTARNN_FUZZ=ON -DTARNN_CUDA=OFF -DTARNN_BUILD_TESTS=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${harnesses[@]/#/fuzz_}"
flock -u 9
status=0
for h in "${harnesses[@]}"; do
  mkdir -p "build-fuzz/fuzz-corpus-$h" "build-fuzz/findings-$h"
  echo "== fuzz_$h for $seconds s"
  # -timeout: a unit slower than this is a hang; 10 s falsely flagged ASan's allocator stalled in
  # fclose when a niced fuzzer was starved of CPU for 10 s (the input then ran in 0.3 s)
  if ! build-fuzz/tests/fuzz_"$h" -max_total_time="$seconds" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="build-fuzz/findings-$h/" \
      "build-fuzz/fuzz-corpus-$h" "tests/fuzz/corpus/$h" >"build-fuzz/fuzz-$h.log" 2>&1; then
    echo "fuzz_$h: a finding, see build-fuzz/findings-$h/ and build-fuzz/fuzz-$h.log"
    status=1
  fi
  grep -E "^#[0-9]+.*DONE|stat::number_of_executed_units|stat::new_units_added|cov:" \
    "build-fuzz/fuzz-$h.log" | tail -3
done
exit $status
