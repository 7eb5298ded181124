#!/usr/bin/env bash
# The md5 of every byte users rely on, for checking that a change leaves them alone: run it with
# the binary before and after the change and compare the lists (diff). Covers sample (grid, .npy,
# PNG folder), score (every image's bits/dim, to the last digit) and complete (grid, PNG folder),
# with the shipped model and the small golden, fp32 and bf16, the default and an odd --batch and
# --threads, and --no-prefill.
#
#   tools/output_hashes.sh BIN MNIST_TEST_IDX OUT_DIR     (MNIST: tools/mnist_data.py --out data/mnist)
#   -> OUT_DIR/*, OUT_DIR.md5 (one line per output), and the md5 of that list on stdout
set -euo pipefail
BIN=$(realpath "$1") MNIST=$(realpath "$2") OUT=$3
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=${TARNN_PYTHON:-/usr/bin/python3}
per_image() { "$PY" -c 'import json,sys; j=json.load(sys.stdin); print(repr(j["bits_per_dim"]), [repr(x) for x in j["per_image"]])'; }
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
cd "$OUT"
for model in "$SRC/models/mnist" "$SRC/tests/golden/small"; do
  m=$(basename "$model")
  if [ "$m" = small ]; then T=$model/inputs-idx-ubyte I=0-2 J=2,1; else T=$MNIST I=0-3 J=3,1; fi
  for p in fp32 bf16; do
    for bt in "0 0" "7 2"; do
      set -- $bt
      tag=$m-$p-b$1-t$2
      R=(--model "$model" --precision $p --batch $1 --threads $2 --quiet)
      "$BIN" sample "${R[@]}" -n 24 --seed 1 -o $tag-grid.png --npy $tag.npy --out-dir $tag-dir >/dev/null
      "$BIN" score "${R[@]}" --images "$T" --limit 40 --json | per_image >$tag-score.txt
      "$BIN" complete "${R[@]}" --images "$T" --index $I --samples 3 --seed 2 -o $tag-complete.png \
        --out-dir $tag-cdir >/dev/null
    done
    R=(--model "$model" --precision $p --no-prefill --quiet)
    "$BIN" score "${R[@]}" --images "$T" --limit 10 --json | per_image >$m-$p-noprefill-score.txt
    "$BIN" complete "${R[@]}" --images "$T" --index $J --keep-rows 2 --samples 2 \
      -o $m-$p-noprefill-complete.png >/dev/null
  done
done
"$BIN" info --model "$SRC/models/mnist" >info.txt
find . -type f | sort | xargs md5sum >"$OUT.md5"
md5sum <"$OUT.md5"
