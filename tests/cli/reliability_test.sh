#!/usr/bin/env bash
# Outputs that never lie (issue 12): full disks, interrupted writes, failing threads and
# allocations, hostile inputs and out-of-range numbers, end to end through the command. Each check
# is one reproducer of a defect of the probe that found them.
# usage: reliability_test.sh TARNN SOURCE_DIR FAULT_INJECT_SO
TARNN=$1
SRC=$2
FAULT=$3
source "$(dirname "$0")/cli_lib.sh"
need_mnist
# CMD refused before any work: a progress line at every report (TARNN_PROGRESS_SECONDS tiny) would
# make its stderr more than the one line expect_error wants; `timeout` only stops a run that hangs
before_any_work() { TARNN_PROGRESS_SECONDS=0.000001 timeout 600 "$@"; }
no_temporaries() { # DIR WHAT
  if ls -a "$1" | grep -q '\.tmp'; then bad "$2: a temporary was left in $1: $(ls -a "$1" | grep tmp | head -3)"; else ok; fi
}

# --- 1. a full disk: exit non-zero naming the path and the OS error, the old output intact,
# no temporary. A 64 KB tmpfs, mounted directly (root) or in a user namespace.
full_disk() {
  local fs=$1
  "$TARNN" sample --model "$SMALL" -n 4 -o "$fs/grid.png" >/dev/null 2>&1 || { bad "could not write a small grid"; return; }
  cp "$fs/grid.png" "$work/grid-before.png"
  expect_error "$fs/grid.png: cannot write: No space left on device" "$TARNN" sample --model "$SMALL" -n 8000 --seed 1 -o "$fs/grid.png"
  cmp -s "$fs/grid.png" "$work/grid-before.png" && ok || bad "the previous grid was replaced"
  no_temporaries "$fs" "full disk, grid"
  # a run whose outputs cannot fit is refused before the first image (a --npy of 400 images on a
  # 256 KiB disk once failed after 51 s of work, leaving its .partial filling the disk)
  expect_error "$fs/big.npy.partial: needs 320 kB and its disk has " "$TARNN" sample --model "$SMALL" -n 8000 --npy "$fs/big.npy"
  [ ! -e "$fs/big.npy.partial" ] && ok || bad "a refused --npy left its .partial"
  expect_error "$fs/d: needs 536 kB and its disk has " "$TARNN" sample --model "$SMALL" -n 8000 --out-dir "$fs/d"
  # one that fits the first check but fills the disk as it goes (a PNG takes a page of tmpfs):
  # the OS's error, and the finished images kept for --resume
  expect_error "No space left on device" "$TARNN" sample --model "$SMALL" -n 200 --batch 4 --out-dir "$fs/d"
  grep -qE "; the [0-9]+ images written before are kept: the same command with --resume goes on$" "$work/err" && ok || bad "a full disk mid-run: $(cat "$work/err")"
  if [ -n "$(find "$fs/d" -type f -size 0)" ]; then bad "0-byte images in --out-dir"; else ok; fi
  no_temporaries "$fs/d" "full disk, --out-dir"
  rm -rf "$fs/d" "$fs"/*.png
  head -c 60000 /dev/urandom >"$fs/filler"
  expect_error "cannot write" "$TARNN" complete --model "$SMALL" --images "$SMALL/inputs-idx-ubyte" --samples 64 -o "$fs/c.png"
  [ -e "$fs/c.png" ] && bad "complete left a grid on a full disk" || ok
  no_temporaries "$fs" "full disk, complete"
}
disk=$work/tmpfs
mkdir -p "$disk"
if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=64k tmpfs "$disk" 2>/dev/null; then
  full_disk "$disk"
  umount "$disk"
elif command -v unshare >/dev/null && unshare -rm true 2>/dev/null; then
  export -f full_disk no_temporaries expect_error ok bad
  unshare -rm bash -c "mount -t tmpfs -o size=64k tmpfs '$disk' && TARNN='$TARNN' SMALL='$SMALL' work='$work' \
    pass=0 fail=0; source '$(dirname "$0")/cli_lib.sh' >/dev/null; full_disk '$disk'; [ \$fail -eq 0 ]" \
    && ok || bad "the full-disk checks failed (in a user namespace)"
else
  echo "full-disk checks skipped: cannot mount a tmpfs here"
fi

# A file-size limit makes every write fail (EFBIG) where a tmpfs cannot be had.
( trap '' XFSZ; ulimit -f 8; "$TARNN" sample --model "$SMALL" -n 2000 -o "$work/big.png" ) >"$work/out" 2>"$work/err"
[ $? -eq 1 ] && grep -q "big.png: cannot write: File too large" "$work/err" && [ ! -e "$work/big.png" ] && ok || bad "file-size limit: $(cat "$work/err")"
no_temporaries "$work" "file-size limit"

# --- 2. undecodable images: the 71-byte PNG with a reserved deflate block type (SIGSEGV before)
printf '\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x00\x1c\x00\x00\x00\x1c\x08\x00\x00\x00\x00\x57\x66\x80\x48\x00\x00\x00\x0eIDAT\x78\x9c\x07\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xac\x51\x7d\x0b\x00\x00\x00\x00IEND\xae\x42\x60\x82' >"$work/bad.png"
expect_eq "$(wc -c <"$work/bad.png" | tr -d ' ')" "71" "the reproducer's size"
expect_error "bad.png: cannot decode PNG" "$TARNN" score --model "$MNIST" --images "$work/bad.png"
expect_error "bad.png: cannot decode PNG" "$TARNN" complete --model "$MNIST" --images "$MNIST/inputs-idx-ubyte" --mask "$work/bad.png" -o "$work/x.png"
mkdir -p "$work/empty"
expect_error "a folder without image files" "$TARNN" score --model "$SMALL" --images "$work/empty"

# --- 3. huge -n: refused before any work, pointing to per-image outputs
for n in 100000 2500000 5000000 10000000; do
  expect_error "write one PNG per image (--out-dir) instead" before_any_work "$TARNN" sample --model "$MNIST" -n $n -o "$work/huge.png"
done

# A 1024 x 1024 model with one tiny layer: a megabyte per image (for 5 and 6).
$PY - "$work/wide" <<'PYEOF'
import json, os, struct, sys
import numpy as np
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
cfg = dict(format_version=1, height=1024, width=1024, channels=1, n_layers=1, n_heads=1, d_head=1,
           d_model=2, d_ff=1, activation="relu", mixtures=1, attention="linear")
json.dump(cfg, open(f"{d}/config.json", "w"))
L, names = 1024 * 1024 - 1, {}
def t(name, *shape): names[name] = np.zeros(shape, np.float32)
t("value_embedding.weight", 256, 1); t("pos_embedding.pe", L, 1)
for p in ("query", "key", "value"):
    t(f"transformer.layers.0.attention.{p}_projection.weight", 1, 2); t(f"transformer.layers.0.attention.{p}_projection.bias", 1)
t("transformer.layers.0.attention.out_projection.weight", 2, 1); t("transformer.layers.0.attention.out_projection.bias", 2)
t("transformer.layers.0.linear1.weight", 1, 2); t("transformer.layers.0.linear1.bias", 1)
t("transformer.layers.0.linear2.weight", 2, 1); t("transformer.layers.0.linear2.bias", 2)
for n in ("transformer.layers.0.norm1", "transformer.layers.0.norm2", "transformer.norm"):
    t(f"{n}.weight", 2); t(f"{n}.bias", 2)
t("predictor.weight", 3, 2); t("predictor.bias", 3)
head, at, blobs = {}, 0, []
for k, v in names.items():
    b = v.tobytes(); head[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [at, at + len(b)]}; at += len(b); blobs.append(b)
h = json.dumps(head).encode()
open(f"{d}/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PYEOF
# --- 5. a worker that cannot start, or runs out of memory: one line, exit 1, no abort
if [ -z "${TARNN_TEST_SANITIZED:-}" ]; then # the sanitizers' runtime must be loaded first
  for cmd in "sample --model $SMALL -n 8 -o $work/t.png" "bench --model $SMALL --batch 8 --steps 2" \
             "complete --model $SMALL --images $SMALL/inputs-idx-ubyte -o $work/t.png"; do
    # shellcheck disable=SC2086
    LD_PRELOAD=$FAULT TARNN_FAIL_THREAD=2 "$TARNN" $cmd --threads 4 >"$work/out" 2>"$work/err"
    rc=$?
    [ $rc -eq 1 ] && grep -q "cannot start a CPU thread" "$work/err" && [ "$(wc -l <"$work/err")" -eq 1 ] && ok || bad "thread start failure ($cmd): rc $rc: $(cat "$work/err")"
  done
  # no thread for the writer of finished batches (the second start, after the one worker's): the
  # batch is written on the main thread instead
  LD_PRELOAD=$FAULT TARNN_FAIL_THREAD=2 "$TARNN" sample --model "$SMALL" -n 4 --threads 1 --out-dir "$work/w1" --quiet >"$work/out" 2>"$work/err" && ok || bad "no writer thread: $(cat "$work/err")"
  [ "$(find "$work/w1" -name '*.png' | wc -l)" -eq 4 ] && ok || bad "no writer thread: not 4 PNGs"
  # the wide model below: each worker's batch of 2 images holds 6 MB of bytes, more than the 5 MB
  # allowed; the weights and the outputs, made on the main thread, are 4 MB each
  LD_PRELOAD=$FAULT TARNN_FAIL_ALLOC_OVER=5000000 timeout 600 "$TARNN" sample --model "$work/wide" -n 4 --threads 2 -o "$work/t.png" >"$work/out" 2>"$work/err"
  rc=$?
  [ $rc -eq 1 ] && grep -q "out of memory" "$work/err" && ok || bad "allocation failure in a worker: rc $rc: $(cat "$work/err")"
  # info holds the weights alone: its advice is not --batch's (issue 42; a model beyond 3/4 of the
  # machine is refused before loading: tests/cli/files_test.sh)
  LD_PRELOAD=$FAULT TARNN_FAIL_ALLOC_OVER=1000000 "$TARNN" info --model "$work/wide" >"$work/out" 2>"$work/err"
  expect_eq "$? $(cat "$work/err")" "1 tarnn: error: out of memory (the model's weights do not fit in the memory this process may use)" "info out of memory"
else
  echo "fault injection skipped under the sanitizers"
fi

# --- 6. the whole job's memory, before any work: streamed outputs hold one chunk whatever -n is
# (tests/cli/streaming_test.sh measures it); what must be held whole is refused at once (a grid of
# the wide model's megabyte images; the library's own check: tests/jobs/test_complete.cpp)
expect_error "MB a grid PNG holds" before_any_work "$TARNN" sample --model "$work/wide" -n 1000 -o "$work/wide.png"

# --- 7. the temporary: never a planted link, never shared
echo victim >"$work/victim"
ln -s "$work/victim" "$work/o.png.tmp"
expect_ok "$TARNN" sample --model "$SMALL" -n 2 -o "$work/o.png"
expect_eq "$(cat "$work/victim")" "victim" "the planted link's target"
rm "$work/o.png.tmp"
"$TARNN" sample --model "$SMALL" -n 300 --seed 1 -o "$work/same.png" >/dev/null 2>&1 &
"$TARNN" sample --model "$SMALL" -n 300 --seed 2 -o "$work/same.png" >/dev/null 2>&1 &
wait
$PY -c "import zlib,sys; d=open('$work/same.png','rb').read(); sys.exit(not (d.startswith(b'\x89PNG') and d.endswith(b'IEND\xaeB\`\x82')))" && ok || bad "two runs writing one -o: not one whole PNG"
no_temporaries "$work" "two runs writing one -o"

# --- 8. every output path checked before any work (a run of minutes fails at once)
expect_error "cannot write" before_any_work "$TARNN" sample --model "$MNIST" -n 20000 -o "$work/no/such/dir/g.png"
touch "$work/a-file"
expect_error "cannot make the output folder" before_any_work "$TARNN" sample --model "$MNIST" -n 20000 --out-dir "$work/a-file"
mkdir -p "$work/folder.png"
expect_error "is a folder" before_any_work "$TARNN" sample --model "$MNIST" -n 20000 -o "$work/folder.png"
expect_error "cannot write" before_any_work "$TARNN" complete --model "$MNIST" --images "$MNIST/inputs-idx-ubyte" -o "$work/no/dir/c.png"
expect_error "cannot write" before_any_work "$TARNN" bench --model "$MNIST" --json-file "$work/no/dir/b.json"

# --- 9. numbers out of range are refused, never clamped or wrapped
expect_error "--seed must be in [0, 18446744073709551615]" "$TARNN" sample --model "$SMALL" --seed 18446744073709551616 -o "$work/x.png"
expect_error "is not a whole number" "$TARNN" sample --model "$SMALL" --seed 1e23 -o "$work/x.png"
expect_error "--seed must be in" "$TARNN" sample --model "$SMALL" --seed -1 -o "$work/x.png"
expect_ok "$TARNN" sample --model "$SMALL" --seed 18446744073709551615 -n 1 -o "$work/x.png"
expect_error "--first must be in" "$TARNN" sample --model "$SMALL" --first 9223372036854775807 -n 2 -o "$work/x.png"
expect_error "--limit must be in" "$TARNN" score --model "$SMALL" --images "$SMALL/inputs-idx-ubyte" --limit -1
expect_error "--samples must be in [1, 64]" "$TARNN" complete --model "$SMALL" --images "$SMALL/inputs-idx-ubyte" -o "$work/x.png" --samples 99999999999999999999999
expect_error "--steps" "$TARNN" bench --model "$SMALL" --steps 3.5

# --- 11. a CPU run never maps CUDA: it starts under a 400 MB address-space limit
if [ -z "${TARNN_TEST_SANITIZED:-}" ]; then # the sanitizers reserve terabytes of address space
  ( ulimit -v 400000; "$TARNN" info --model "$SMALL" ) >"$work/out" 2>"$work/err" && ok || bad "info under 400 MB: $(cat "$work/err")"
  ( ulimit -v 400000; "$TARNN" sample --model "$SMALL" -n 4 -o "$work/v.png" ) >"$work/out" 2>"$work/err" && ok || bad "sample under 400 MB: $(cat "$work/err")"
fi

# --- signals: an --out-dir run interrupted while it writes leaves no temporary. The signal comes
# from the run itself at a known point (TARNN_TEST_INTERRUPT_AFTER, docs/ENVIRONMENT.md: once its
# first batch of 256 is computed, while the writer thread writes it), not from a kill that races it.
for sig in INT TERM; do
  rm -rf "$work/sig"
  TARNN_TEST_INTERRUPT_AFTER=50:$sig "$TARNN" sample --model "$SMALL" -n 60000 -o "$work/sig.png" --out-dir "$work/sig" >/dev/null 2>"$work/err"
  rc=$?
  want=$((128 + $([ $sig = INT ] && echo 2 || echo 15)))
  [ $rc -eq $want ] && grep -q "interrupted (signal $((want - 128))): 256 of 60000 images written" "$work/err" && ok || bad "SIG$sig: exit $rc: $(cat "$work/err")"
  expect_eq "$(find "$work/sig" -name '*.png' | wc -l)" 256 "SIG$sig: the PNGs of the batch written when it came"
  no_temporaries "$work/sig" "SIG$sig during --out-dir writes"
done

# --- a file that changes while it is read (issue 42, point 2): one line and exit 1, never a signal
# (a mapped model truncated as it loaded: SIGBUS) nor a mix of two versions (images half old and
# half new were scored). The shim writes the file over with another's bytes at its first read.
if [ -z "${TARNN_TEST_SANITIZED:-}" ]; then
  changing() { # FILE OTHER CMD...: CMD, FILE written over by OTHER as CMD first reads it
    local file=$1 other=$2
    shift 2
    LD_PRELOAD=$FAULT TARNN_CHANGE_FILE=$file TARNN_CHANGE_TO=$other "$@"
  }
  cp -r "$SMALL" "$work/moving"
  : >"$work/no-bytes"
  expect_error "$work/moving/model.safetensors: changed while it was read" \
    changing "$work/moving/model.safetensors" "$work/no-bytes" "$TARNN" info --model "$work/moving"
  cp "$SMALL/model.safetensors" "$work/moving/"
  sed 's/"gelu"/"relu"/' "$SMALL/config.json" >"$work/relu.json"
  expect_error "$work/moving/config.json: changed while it was read" \
    changing "$work/moving/config.json" "$work/relu.json" "$TARNN" info --model "$work/moving"
  cp "$SMALL/config.json" "$work/moving/"
  # config.json replaced once read, as the weights are read: one version's config is not loaded
  # with another's weights
  TARNN_CHANGE_WHEN=$work/moving/model.safetensors expect_error "$work/moving/config.json: changed while it was read" \
    changing "$work/moving/config.json" "$work/relu.json" "$TARNN" info --model "$work/moving"
  cp "$SMALL/config.json" "$work/moving/"
  $PY -c "import sys; d = bytearray(open(sys.argv[1], 'rb').read()); d[20:] = bytes(255 - b for b in d[20:]); open(sys.argv[2], 'wb').write(d)" \
    "$SMALL/inputs-idx-ubyte" "$work/inverted-idx" # other images, the same shapes
  cp "$SMALL/inputs-idx-ubyte" "$work/images-idx"
  expect_error "$work/images-idx: changed while it was read" \
    changing "$work/images-idx" "$work/inverted-idx" "$TARNN" score --model "$SMALL" --images "$work/images-idx"
else
  echo "files changing as they are read: skipped under the sanitizers (tests/io/test_loader.cpp runs)"
fi

# --- every image tarnn writes, tarnn reads back (a 2-channel model's own samples)
expect_ok "$TARNN" sample --model "$SMALL" -n 2 --seed 5 -o "$work/two.png" --out-dir "$work/two"
expect_ok "$TARNN" score --model "$SMALL" --images "$work/two/00000001.png"

finish
