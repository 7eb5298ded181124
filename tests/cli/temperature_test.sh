#!/usr/bin/env bash
# --temperature (docs/SPEC.md section 2): 1, the default, gives the bytes of the sampler before the
# temperature existed (md5 of what a2b9950's binary wrote for the same commands); any temperature
# gives the same images whatever --batch and --threads, with and without the prefill; every
# refused value is a usage error; the JSON records it. The small model and one shipped-model digit.
# usage: temperature_test.sh TARNN SOURCE_DIR
TARNN=$1
SRC=$2
source "$(dirname "$0")/cli_lib.sh"
IDX=$SMALL/inputs-idx-ubyte
md5() { md5sum <"$1" | cut -c1-32; }

# --- T = 1: the bytes before it existed, by default and when given
for t in "" "--temperature 1" "--temperature 1.0"; do
  # shellcheck disable=SC2086
  expect_ok "$TARNN" sample --model "$SMALL" -n 64 --seed 1 --npy "$work/a.npy" --quiet $t
  expect_eq "$(md5 "$work/a.npy")" ea07ca0bf8c36f2b862f975b06a48a57 "sample ${t:-by default}: the bytes of a2b9950"
  rm -f "$work/a.npy"
done
if [ -z "${TARNN_TEST_SANITIZED:-}" ]; then # (an MNIST digit is seconds there; the small model covers the code)
  expect_ok "$TARNN" sample --model "$SRC/models/mnist" -n 1 --seed 1 --npy "$work/m.npy" --quiet --temperature 1
  expect_eq "$(md5 "$work/m.npy")" 1faaad59a73ed911ff91d3df2f040560 "models/mnist at T = 1: the bytes of a2b9950"
fi
expect_ok "$TARNN" complete --model "$SMALL" --images "$IDX" --samples 3 --seed 2 -o "$work/c.png" --quiet --temperature 1
expect_eq "$(md5 "$work/c.png")" 4cd7d0d686b5c133ee31481e4efa1df4 "complete at T = 1: the bytes of a2b9950"

# --- T = 0.7: the same images for any batch and thread count, and not T = 1's
for bt in "0 0" "7 3" "1 1"; do
  set -- $bt
  expect_ok "$TARNN" sample --model "$SMALL" -n 24 --seed 5 --temperature 0.7 --batch "$1" --threads "$2" \
    --npy "$work/t-$1-$2.npy" --quiet
  expect_ok "$TARNN" complete --model "$SMALL" --images "$IDX" --samples 3 --seed 6 --keep-rows 2 \
    --temperature 0.7 --batch "$1" --threads "$2" -o "$work/c-$1-$2.png" --quiet
done
expect_ok "$TARNN" complete --model "$SMALL" --images "$IDX" --samples 3 --seed 6 --keep-rows 2 \
  --temperature 0.7 --no-prefill -o "$work/c-noprefill.png" --quiet
for f in t-7-3.npy t-1-1.npy; do cmp -s "$work/t-0-0.npy" "$work/$f" && ok || bad "sample at T = 0.7: $f differs"; done
for f in c-7-3.png c-1-1.png c-noprefill.png; do cmp -s "$work/c-0-0.png" "$work/$f" && ok || bad "complete at T = 0.7: $f differs"; done
expect_ok "$TARNN" sample --model "$SMALL" -n 24 --seed 5 --npy "$work/t1.npy" --quiet
cmp -s "$work/t-0-0.npy" "$work/t1.npy" && bad "T = 0.7 gave T = 1's images" || ok

# --- refused: usage errors (exit 2) before any model is loaded, whichever command
for t in 0 -0.5 nan inf 1e-50 1e39 warm ""; do
  expect_usage "--temperature must be a finite number above 0" "$TARNN" sample --model "$work/none" -n 1 --npy "$work/x.npy" --temperature "$t"
  expect_usage "--temperature must be a finite number above 0" "$TARNN" complete --model "$work/none" --images "$IDX" -o "$work/x.png" --temperature "$t"
done
[ -e "$work/x.npy" ] || [ -e "$work/x.png" ] && bad "a refused temperature left an output" || ok

# --- the JSON records the temperature given
expect_ok "$TARNN" sample --model "$SMALL" -n 2 --seed 1 --temperature 0.7 --out-dir "$work/j" --json --quiet
$PY -c "import json, sys; sys.exit(json.load(open('$work/out'))['temperature'] != 0.7)" && ok || bad "sample JSON: $(grep temperature "$work/out")"
expect_ok "$TARNN" complete --model "$SMALL" --images "$IDX" --index 0 --json --quiet
$PY -c "import json, sys; sys.exit(json.load(open('$work/out'))['temperature'] != 1)" && ok || bad "complete JSON: $(grep temperature "$work/out")"

finish
