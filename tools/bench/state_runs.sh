#!/bin/bash
# The 16-bit state on the CPU (docs/STATE.md): the paper's MNIST shape at batch 256, every position,
# fp32 GEMMs with the fp32 state, bf16 GEMMs with the fp32 state and with the fp16 state,
# interleaved, three rounds; then this machine's ceilings (tools/bench/ceilings.c), in the same run.
#   tools/bench/state_runs.sh BUILD_DIR OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build} D=${2:-tools/bench/runs/state}
mkdir -p "$D"
for r in 1 2 3; do
  for cfg in "fp32 fp32" "bf16 fp32" "bf16 fp16"; do
    set -- $cfg
    tag=mnist-linear-b256-$1-state-$2-r$r
    "$B"/tarnn bench --shape mnist --batch 256 --threads 2 --precision $1 --state $2 --quiet \
      --json-file "$D/$tag.json" >"$D/$tag.txt"
    grep images/s "$D/$tag.txt"
  done
done
gcc -O2 -march=native -pthread -o /tmp/tarnn-ceilings tools/bench/ceilings.c
/tmp/tarnn-ceilings | tee "$D/ceilings.txt"
