#!/bin/bash
# The GEMMs' precision beside the state's format on the CPU: the paper's MNIST shape at batch 256,
# every position, 2 threads, the settings interleaved (A B C ..., three rounds); then this
# machine's ceilings (tools/bench/ceilings.c) in the same run.
#   state (docs/STATE.md): fp32 GEMMs with the fp32 state, bf16 GEMMs with the fp32 and the fp16
#     state
#   int8 (docs/PRECISION.md, "int8"): those and int8 GEMMs with the fp16 state, each run's load
#     average in OUT_DIR/load.txt (the state runs, recorded before that log, are as they were)
#   tools/bench/gemm_state_runs.sh state|int8 BUILD_DIR OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:-} B=${2:-build} D=${3:-tools/bench/runs/${1:-}}
case $mode in
state) settings=("fp32 fp32" "bf16 fp32" "bf16 fp16") load= ;;
int8) settings=("fp32 fp32" "bf16 fp32" "bf16 fp16" "int8 fp16") load=$D/load.txt ;;
*)
  echo "usage: tools/bench/gemm_state_runs.sh state|int8 BUILD_DIR OUT_DIR" >&2
  exit 2
  ;;
esac
log_load() { # WHAT
  [ -z "$load" ] || echo "$1: load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$load"
}
mkdir -p "$D"
for r in 1 2 3; do
  for setting in "${settings[@]}"; do
    set -- $setting
    tag=mnist-linear-b256-$1-state-$2-r$r
    log_load "$tag"
    "$B"/tarnn bench --shape mnist --batch 256 --threads 2 --precision $1 --state $2 --quiet \
      --json-file "$D/$tag.json" >"$D/$tag.txt"
    grep images/s "$D/$tag.txt"
  done
done
gcc -O2 -march=native -pthread -o /tmp/tarnn-ceilings tools/bench/ceilings.c
/tmp/tarnn-ceilings | tee "$D/ceilings.txt"
log_load end
