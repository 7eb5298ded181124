#!/usr/bin/env bash
# End-to-end runs of `tarnn complete`: the grid's size, known pixels kept in the written
# completions, reproducibility across --batch/--threads, and one-line errors with no output.
# usage: complete_test.sh TARNN SOURCE_DIR   (TARNN_GOLDEN_MNIST: the MNIST-size golden folder)
TARNN=$1
SRC=$2
source "$(dirname "$0")/cli_lib.sh"
need_mnist

# A dependency-free PNG reader (8-bit, non-interlaced) and writer for the checks below.
cat >"$work/png.py" <<'PYEOF'
import struct, zlib
def read(path):
    data = open(path, "rb").read()
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR": hdr = struct.unpack(">IIBBBBB", body)
        if kind == b"IDAT": idat += body
        pos += 12 + n
    w, h, depth, ctype = hdr[:4]
    assert depth == 8 and hdr[6] == 0
    bpp = {0: 1, 2: 3, 4: 2, 6: 4}[ctype]
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pred = [0, a, b, (a + b) // 2,
                    a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else b if abs(p - b) <= abs(p - c) else c][f]
            line[i] = (line[i] + pred) & 255
        rows.append(bytes(line)); prev = line
    return w, h, bpp, b"".join(rows)
def write(path, w, h, bpp, pixels):
    ctype = {1: 0, 3: 2}[bpp]
    raw = b"".join(b"\0" + pixels[y * w * bpp:(y + 1) * w * bpp] for y in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, ctype, 0, 0, 0))
                           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
PYEOF
export PYTHONPATH=$work

# --- help
expect_ok "$TARNN" --help
grep -q complete "$work/out" && ok || bad "--help does not list complete"
expect_ok "$TARNN" complete --help
for flag in --model --images --index --keep-rows --keep --mask --samples --seed --output --out-dir \
  --batch --threads --device "i \* samples + k" "dim red"; do
  grep -q -- "$flag" "$work/out" && ok || bad "complete --help lacks $flag"
done

# --- the grid: 3 images x 3 samples of 5x4 -> rows of 5 cells (occluded, 3, original)
expect_ok "$TARNN" complete --model "$SMALL" --images "$SMALL/inputs-idx-ubyte" --index 0-2 \
  --samples 3 --keep-rows 2 --seed 1 -o "$work/s.png" --out-dir "$work/sd" --scale 1
expect_eq "$(png_size "$work/s.png")" "38x23" "grid of 3 rows of 5 cells of 4x5, 2 pixels apart, a 6-pixel band"
expect_eq "$(ls "$work/sd" | wc -l)" "9" "one PNG per completion"
grep -q "3 images x 3 samples (16 of 40 bytes known)" "$work/out" && ok || bad "summary line: $(cat "$work/out")"
# same seed, other batch and threads, other selection around image 1: the same completions
expect_ok "$TARNN" complete --model "$SMALL" --images "$SMALL/inputs-idx-ubyte" --index 2,1 \
  --samples 3 --keep-rows 2 --seed 1 --batch 1 --threads 2 -o "$work/s2.png" --out-dir "$work/sd2"
for k in 00 01 02; do
  cmp -s "$work/sd/00000001-$k.png" "$work/sd2/00000001-$k.png" && ok || bad "image 1 sample $k differs across batch/threads/selection"
done
cmp -s "$work/sd/00000001-00.png" "$work/sd/00000001-01.png" && bad "samples 0 and 1 are identical" || ok

# --- MNIST size: a checkerboard mask (not a prefix); known pixels kept in every completion
$PY -c "
import png
png.write('$work/board.png', 28, 28, 1, bytes(255 * ((y + x) % 2) for y in range(28) for x in range(28)))
png.write('$work/hole.png', 28, 28, 3, bytes(0 if 7 <= y < 21 and 7 <= x < 21 else 255 for y in range(28) for x in range(28) for _ in range(3)))
png.write('$work/bad-mask.png', 27, 28, 1, bytes(27 * 28))"
for m in board hole; do
  rm -rf "$work/md"
  expect_ok "$TARNN" complete --model "$MNIST" --images "$MNIST/inputs-idx-ubyte" --index 0-1 \
    --samples 2 --mask "$work/$m.png" --seed 5 --threads 2 -o "$work/m-$m.png" --out-dir "$work/md" --scale 1
  expect_eq "$(png_size "$work/m-$m.png")" "128x62" "MNIST grid: 2 rows of 4 cells of 28x28 and the band"
  $PY - "$MNIST/inputs-idx-ubyte" "$work/$m.png" "$work/md" <<'PYEOF' && ok || bad "$m: known pixels changed"
import os, sys, png
idx = open(sys.argv[1], "rb").read()[16:]
w, h, bpp, mask = png.read(sys.argv[2])
known = [any(mask[i * bpp:(i + 1) * bpp]) for i in range(784)]
done = sorted(os.listdir(sys.argv[3]))
assert len(done) == 4, done
for name in done:
    i = int(name[:8])
    w, h, bpp, px = png.read(os.path.join(sys.argv[3], name))
    assert (w, h, bpp) == (28, 28, 1)
    for t in range(784):
        if known[t] and t > 0:  # p_0 unknown is 0, not the input's
            assert px[t] == idx[i * 784 + t], (name, t)
samples = [png.read(os.path.join(sys.argv[3], "00000000-%02d.png" % k))[3] for k in range(2)]
assert any(samples[0][t] != samples[1][t] for t in range(784) if not known[t]), "samples equal"
PYEOF
done

# --- errors: one line, non-zero, no output file
N="$work/none.png"
C=("$TARNN" complete --model "$MNIST" --images "$MNIST/inputs-idx-ubyte" -o "$N")
expect_error "the model wants 5x4 with 2 channels" "$TARNN" complete --model "$SMALL" --images "$MNIST/inputs-idx-ubyte" -o "$N"
$PY -c "import png; png.write('$work/rgb.png', 28, 28, 3, bytes(28 * 28 * 3)); png.write('$work/big.png', 30, 28, 1, bytes(30 * 28))"
expect_error "PNG has 3 channels (RGB), the model wants 1" "$TARNN" complete --model "$MNIST" --images "$work/rgb.png" -o "$N"
expect_error "images are 28x30 with 1 channel, the model wants 28x28" "$TARNN" complete --model "$MNIST" --images "$work/big.png" -o "$N"
expect_error "out of range: the file holds 2 images (0-1)" "${C[@]}" --index 0-2
expect_error "is not an index or a range" "${C[@]}" --index 0-a
expect_error "--index is empty" "${C[@]}" --index ""
expect_error "chosen twice" "${C[@]}" --index 1,1
expect_error "--samples must be in [1, 64]" "${C[@]}" --samples 0
expect_error "--samples must be in [1, 64]" "${C[@]}" --samples 65
expect_error "--keep-rows must be in [0, 28]" "${C[@]}" --keep-rows 29
expect_error "--keep must be at least 0 (got -1)" "${C[@]}" --keep -1
expect_error "nothing to complete" "${C[@]}" --keep 784
expect_error "mask is 28x27, the images are 28x28" "${C[@]}" --mask "$work/bad-mask.png"
expect_error "cannot open" "${C[@]}" --mask "$work/missing.png"
expect_error "excludes" "${C[@]}" --keep-rows 3 --keep 10
expect_error "excludes" "${C[@]}" --keep 3 --mask "$work/board.png"
expect_error "--images is required" "$TARNN" complete --model "$MNIST" -o "$N"
expect_error "--batch must be in [0, 4194304]" "${C[@]}" --batch -1
expect_error "not available" "${C[@]}" --device tpu
[ -e "$N" ] && bad "a failed run left an output file" || ok
expect_error "cannot write" "$TARNN" complete --model "$SMALL" --images "$SMALL/inputs-idx-ubyte" --index 0 --samples 1 -o "$work/no/such/dir/g.png"
ls -a "$work" | grep -q '\.tmp-' && bad "a temporary file was left behind: $(ls -a "$work")" || ok

# --- the shipped model: the command of docs/COMPLETE.md on real digits
if [ -d "$SRC/models/mnist" ] && [ -f "$SRC/data/mnist/test-images-idx3-ubyte" ]; then
  expect_ok "$TARNN" complete --model "$SRC/models/mnist" --images "$SRC/data/mnist/test-images-idx3-ubyte" \
    --index 0-3 --keep-rows 14 --samples 2 --seed 1 -o "$work/digits.png"
  expect_eq "$(png_size "$work/digits.png")" "512x488" "4 rows of 4 cells of 28x28 and the band, scaled 4x"
fi

finish
