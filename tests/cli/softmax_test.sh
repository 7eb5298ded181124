#!/usr/bin/env bash
# A softmax model (config.json "attention": "softmax") through the command: it samples, scores and
# completes on the CPU with the linear models' flags and RNG contract, and what it cannot do is
# refused before any work in one line (cuda, --state fp16, a batch of KV caches too big).
# usage: softmax_test.sh TARNN SOURCE_DIR   (TARNN_GOLDEN_MNIST, TARNN_GOLDEN_MNIST_SOFTMAX: the
# MNIST-size golden folders, for the memory check)
TARNN=$1
SRC=$2
source "$(dirname "$0")/cli_lib.sh"
need_mnist
SOFT=$SRC/tests/golden/small-softmax
MNIST_SOFT=${TARNN_GOLDEN_MNIST_SOFTMAX:?run through ctest, whose fixture makes the model}
same_npy() { # A.npy B.npy [FIRST]: B equals A's images FIRST.. (0: all of A)
  $PY -c "import numpy as np,sys; a,b=np.load(sys.argv[1]),np.load(sys.argv[2]); f=int(sys.argv[3]); sys.exit(not np.array_equal(a[f:f+len(b)], b))" "$1" "$2" "${3:-0}"
}

# --- info: the attention, and a memory that grows with the position
expect_ok "$TARNN" info --model "$SOFT"
grep -q "^attention       softmax$" "$work/out" && ok || bad "info does not say softmax"
grep -q "^KV cache/image  11232 bytes at the last position, 288 per position .*grows with the position" "$work/out" && ok || bad "info: $(cat "$work/out")"
expect_ok "$TARNN" info --model "$SOFT" --json
$PY -c "import json,sys; j=json.load(open('$work/out')); sys.exit(not (j['attention'] == 'softmax' and j['state_bytes_per_image'] == 11232 and j['memory_grows_with_position'] is True))" && ok || bad "info --json"

# --- sample: image i of a seed whatever --batch, --threads and --first
expect_ok "$TARNN" sample --model "$SOFT" -n 6 --seed 3 --batch 4 --threads 2 --npy "$work/a.npy"
expect_ok "$TARNN" sample --model "$SOFT" -n 6 --seed 3 --batch 1 --threads 1 --npy "$work/b.npy"
same_npy "$work/a.npy" "$work/b.npy" && ok || bad "same seed, other batch and threads: other images"
expect_ok "$TARNN" sample --model "$SOFT" -n 2 --first 4 --seed 3 --npy "$work/c.npy"
same_npy "$work/a.npy" "$work/c.npy" 4 && ok || bad "--first 4: other images"
expect_ok "$TARNN" sample --model "$SOFT" -n 6 --seed 4 --npy "$work/d.npy"
same_npy "$work/a.npy" "$work/d.npy" && bad "another seed gave the same images" || ok

# --- score: the golden's bits/dim (PyTorch's float64 parallel form), with and without prefill
for how in "" --no-prefill; do
  expect_ok "$TARNN" score --model "$SOFT" --images "$SOFT/inputs-idx-ubyte" --json $how
  $PY -c "import json,sys; g=json.load(open('$work/out'))['per_image']; w=json.load(open('$SOFT/expected.json'))['bits_per_dim']; sys.exit(not (len(g) == 3 and max(abs(a - b) for a, b in zip(g, w)) < 1e-5))" && ok || bad "score $how: not the golden's bits/dim"
done

# --- complete: the top two rows kept; the same completions with prefill or without, any batch
for run in "--batch 4 --threads 2" "--batch 1 --threads 1 --no-prefill"; do
  name=$(echo $run | tr -d ' -')
  expect_ok "$TARNN" complete --model "$SOFT" --images "$SOFT/inputs-idx-ubyte" --index 0-2 --keep-rows 2 --samples 2 --seed 5 $run -o "$work/$name.png" --out-dir "$work/$name"
done
expect_eq "$(ls "$work/batch4threads2" | wc -l)" "6" "one PNG per completion"
diff -r "$work/batch4threads2" "$work/batch1threads1noprefill" >/dev/null && ok || bad "complete: prefill or batch changed the completions"

# --- refused before any work, one line each, no output
expect_error "--device cuda runs linear attention only, and this model's config.json says attention \"softmax\": run it with --device cpu" "$TARNN" sample --model "$SOFT" -n 1 --device cuda -o "$work/none.png"
expect_error "--state fp16 stores linear attention's state S; this model's attention is softmax, whose KV cache is fp32" "$TARNN" score --model "$SOFT" --images "$SOFT/inputs-idx-ubyte" --state fp16
expect_ok "$TARNN" sample --model "$SOFT" -n 1 --state fp32 -o "$work/fp32.png"
# 10,000 images: 2.7 GB of linear state (accepted), 128 GB of MNIST-size KV caches (refused)
expect_error "--batch 10000 (the KV cache of every image, at the last position) needs 128286" "$TARNN" sample --model "$MNIST_SOFT" -n 1 --batch 10000 -o "$work/none.png"
expect_error "(the KV cache of every image, at the last position) needs" "$TARNN" complete --model "$MNIST_SOFT" --images "$MNIST_SOFT/inputs-idx-ubyte" --index 0 --batch 10000 -o "$work/none.png"
expect_ok "$TARNN" sample --model "$MNIST" -n 1 --batch 10000 -o "$work/linear.png"
[ -e "$work/none.png" ] && bad "a refused run left an output file" || ok
finish
