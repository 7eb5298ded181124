#!/usr/bin/env bash
# tools/train.py in the modes a GPU lease runs it (tools/gpu/lease.sh train-start), a few steps of
# a tiny model on the CPU: bf16 autocast, the blocked attention, --ref-batch, --ema, --compile,
# --end-at with --time-decay, --rate-seconds, --init-from an exported folder; --ema's average
# checked step by step (train_average.py). torch.compile's watchdog: a compile that fails, or
# never finishes, is dropped and the step done again in eager mode, so the weights are those of a
# run that never compiled, bit for bit (TARNN_TRAIN_COMPILE=fail|hang puts a stand-in in
# torch.compile's place).
# usage: train_modes_test.sh SOURCE_DIR
set -u
SRC=$1
PY=${TARNN_PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
has() { grep -qE -- "$2" "$work/$1.log" || bad "$1: no '$2' in: $(grep -v '^step' "$work/$1.log" | tail -4)"; }
$PY "$SRC/tests/tools/tiny_images.py" "$work"
# the lease's flags (tools/gpu/lease.sh TRAIN_ARGS and train-start), at a tiny size: chunk 2 of
# 35 positions is the blocked form; bf16 autocast is the default
tiny=(--height 6 --width 6 --n-layers 2 --n-heads 2 --d-head 4 --d-model 8 --d-ff 16 --mixtures 2)
lease=(--batch 4 --lr 1.5e-4 --warmup 500 --chunk 2 --ema 0.9 --ema-from-decay --eval-every 5
       --eval-images 8 --ckpt-minutes 1 --threads 1 --max-steps 12)
train() { # NAME [ENV...] -- ARGS...: a run into $work/NAME.pt, its output in $work/NAME.log
  local name=$1 envs=()
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" $PY "$SRC/tools/train.py" --train "$work/train-idx" --heldout "$work/held-idx" \
    --ckpt "$work/$name.pt" "${lease[@]}" "$@" >"$work/$name.log" 2>&1 ||
    bad "$name exited $?: $(tail -3 "$work/$name.log")"
}
train eager -- "${tiny[@]}"
has eager "fresh optimizer \(AdamW, no moments\): the rate warms up linearly from 0 to .* over 500 steps \(2000 images\)"
train compile -- "${tiny[@]}" --compile
has compile "^--compile: (torch .* has no torch.compile: running without|compiled)"
train fail TARNN_TRAIN_COMPILE=fail -- "${tiny[@]}" --compile
has fail "^--compile: compiling failed: RuntimeError: compilation failed .*: eager mode from step 0"
train hang TARNN_TRAIN_COMPILE=hang -- "${tiny[@]}" --compile --compile-timeout 0.5
has hang "^--compile: the first steps took over 0.5 s \(--compile-timeout\): eager mode from step 0"
# the images/s of the first moments after compiling, printed and written; a deadline: --minutes
# from it, the decay over its last half (an hour away: the steps end long before the decay starts)
train rate -- "${tiny[@]}" --rate-seconds 1e-6 --rate-file "$work/rate.json" \
  --end-at $(($(date +%s) + 3600)) --time-decay 0.5
has rate "^rate: [0-9.]+ images/s over [0-9.]+ s, steps 1-[0-9]+, batch 4, eager"
has rate "^training for (59|60)\.[0-9]+ minutes, to .*, the rate decaying over the last (29|30)\.[0-9]+"
# the next lease: from an exported folder, a fresh optimizer with its warm-up stated
$PY "$SRC/tools/export.py" "$work/eager.pt" --out "$work/folder" --ema >"$work/export.log" 2>&1 ||
  bad "export: $(tail -2 "$work/export.log")"
train init -- --init-from "$work/folder" --ref-batch 2
has init "^initialised from .*folder"
has init "^batch 4 against 2: lr 0.000212, warm-up 250 steps"
has init "^fresh optimizer \(AdamW, no moments\): the rate warms up linearly from 0"
# a dropped compile loses nothing: the same weights as the run that never compiled, bit for bit
SRC_TOOLS=$SRC/tools $PY - "$work" <<'PYEOF' || bad "a fallback to eager mode changed the weights"
import json, os, sys
import torch
work = sys.argv[1]
load = lambda n: torch.load(os.path.join(work, n + ".pt"), weights_only=True)
ref = load("eager")
for name in ("fail", "hang", "rate"):
    got = load(name)
    for key in ("model_state", "ema_state"):
        assert all(torch.equal(got[key][k], ref[key][k]) for k in ref[key]), (name, key)
rate = json.load(open(os.path.join(work, "rate.json")))
assert rate["images_per_second"] > 0 and rate["batch"] == 4 and rate["compiled"] is False, rate
print("fail, hang and rate runs: the eager run's weights, bit for bit; rate.json:", rate["images_per_second"] > 0)
PYEOF
# the averaged weights are the average of the steps' weights (--ema-from-decay: of the decay's),
# and the log holds the start's figure, the end's and which weights to keep (train_average.py)
$PY "$SRC/tests/tools/train_average.py" "$work" || bad "train_average.py exited $?"
[ $fail -eq 0 ] && echo "train modes: ok"
exit $fail
