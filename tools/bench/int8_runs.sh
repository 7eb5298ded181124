#!/bin/bash
# int8 GEMMs on the CPU (docs/PRECISION.md, "int8"): the paper's MNIST shape at batch 256, every
# position, 2 threads: fp32, bf16, bf16 with the fp16 state and int8 with the fp16 state,
# interleaved (A B C D, three rounds), each run's load average in its JSON; then this machine's
# ceilings (tools/bench/ceilings.c) in the same run.
#   tools/bench/int8_runs.sh BUILD_DIR OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build} D=${2:-tools/bench/runs/int8}
mkdir -p "$D"
for r in 1 2 3; do
  for cfg in "fp32 fp32" "bf16 fp32" "bf16 fp16" "int8 fp16"; do
    set -- $cfg
    tag=mnist-linear-b256-$1-state-$2-r$r
    echo "$tag: load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$D/load.txt"
    "$B"/tarnn bench --shape mnist --batch 256 --threads 2 --precision $1 --state $2 --quiet \
      --json-file "$D/$tag.json" >"$D/$tag.txt"
    grep images/s "$D/$tag.txt"
  done
done
gcc -O2 -march=native -pthread -o /tmp/tarnn-ceilings tools/bench/ceilings.c
/tmp/tarnn-ceilings | tee "$D/ceilings.txt"
echo "end: load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$D/load.txt"
