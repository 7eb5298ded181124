#!/bin/bash
# fp32 and bf16, interleaved, three rounds: linear (all positions), KV cache and recompute (32 spread positions)
set -e
cd /work/main
D=tools/bench/runs/precision
for r in 1 2 3; do
  for p in fp32 bf16; do
    build/tarnn bench --shape mnist --batch 256 --threads 2 --precision $p --json-file $D/mnist-linear-b256-$p-r$r.json > $D/mnist-linear-b256-$p-r$r.txt 2>&1
    build/tarnn bench --shape mnist --attention softmax --batch 64 --steps 32 --threads 2 --precision $p --json-file $D/mnist-softmax-b64-s32-$p-r$r.json > $D/mnist-softmax-b64-s32-$p-r$r.txt 2>&1
    build/tarnn bench --shape mnist --attention softmax-recompute --batch 2 --steps 32 --threads 2 --precision $p --json-file $D/mnist-recompute-b2-s32-$p-r$r.json > $D/mnist-recompute-b2-s32-$p-r$r.txt 2>&1
  done
done
echo done
