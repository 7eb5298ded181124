#!/usr/bin/env bash
# The runs behind docs/RESULTS.md: each writes NAME.json (tarnn bench --json) and NAME.txt (what
# it printed). Then tools/plot_bench.py draws the figures from the JSON.
#   tools/bench/run.sh [NAME...]   (no names: all)
set -euo pipefail
cd "$(dirname "$0")/../.."
TARNN=${TARNN:-build/tarnn}
out=tools/bench/runs

run() { # NAME ARGS...
  local name=$1
  shift
  if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " == *" $name "* ]]; then return; fi
  echo "== $name: tarnn bench $*"
  "$TARNN" bench "$@" --threads 2 --json-file "$out/$name.json" --quiet | tee "$out/$name.txt"
}
want=("$@")

# The machine is shared (2 cores; a training job and compilers ran niced beside these runs), so
# the table's runs are interleaved and repeated 3 times: linear and softmax see the same load.
# MNIST, 783 positions. Table 1: linear over every position, softmax from 32 positions spread
# over the image; then each softmax once over every position, to see what that extrapolation is
# worth.
for r in 1 2 3; do
  run mnist-linear-b256-r$r --shape mnist --attention linear --batch 256
  run mnist-softmax-b64-s32-r$r --shape mnist --attention softmax --batch 64 --steps 32
  run mnist-recompute-b2-s32-r$r --shape mnist --attention softmax-recompute --batch 2 --steps 32
done
run mnist-softmax-b64 --shape mnist --attention softmax --batch 64
run mnist-recompute-b2 --shape mnist --attention softmax-recompute --batch 2
# images/s against batch size
for b in 1 4 16 64; do run mnist-linear-b$b --shape mnist --attention linear --batch $b; done
for b in 1 4 16 256; do run mnist-softmax-b$b-s32 --shape mnist --attention softmax --batch $b --steps 32; done
for b in 1 4; do
  run mnist-recompute-b$b-s16 --shape mnist --attention softmax-recompute --batch $b --steps 16
done

# CIFAR-10, 3071 positions, 16 layers. Table 2: linear from its first 300 positions (its cost is
# the same at every position; checked once over all 3071), softmax from 32 spread positions.
for r in 1 2 3; do
  run cifar10-linear-b256-s300-r$r --shape cifar10 --attention linear --batch 256 --steps 300
  run cifar10-softmax-b16-s32-r$r --shape cifar10 --attention softmax --batch 16 --steps 32
  run cifar10-recompute-b2-s32-r$r --shape cifar10 --attention softmax-recompute --batch 2 --steps 32
done
run cifar10-linear-b256 --shape cifar10 --attention linear --batch 256
for b in 1 4 16 64; do
  run cifar10-linear-b$b-s300 --shape cifar10 --attention linear --batch $b --steps 300
done
for b in 1 4; do run cifar10-softmax-b$b-s32 --shape cifar10 --attention softmax --batch $b --steps 32; done
run cifar10-recompute-b1-s16 --shape cifar10 --attention softmax-recompute --batch 1 --steps 16
