#!/bin/bash
# The int8 study of docs/PRECISION.md: tools/int8_study.cpp over MNIST's 10,000 test digits in
# slices of 1,000 (each slice its own JSON: a slice already written is skipped, so an interrupted
# run resumes), niced; then tools/plot_int8.py merges the slices.
#   tools/bench/int8_study_runs.sh BUILD_DIR OUT_DIR [FIRST LAST] [--variant NAME=SPEC ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build} D=${2:-/tmp/int8-study}
shift 2 || true
first=0 last=10000
if [[ $# -ge 2 && $1 != --* ]]; then first=$1 last=$2; shift 2; fi
mkdir -p "$D"
for ((f = first; f < last; f += 1000)); do
  out="$D/slice-$f.json"
  [[ -s $out ]] && continue
  nice "$B"/int8_study --model models/mnist --images data/mnist/test-images-idx3-ubyte \
    --first "$f" --limit $((last - f < 1000 ? last - f : 1000)) --batch 50 --threads 2 \
    --out "$out" "$@"
  echo "slice $f done: $(date)"
done
