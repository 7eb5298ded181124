#!/usr/bin/env bash
# The trained weights' way home from a lent GPU, proven without one: a stand-in for the trainer's
# checkpoint at its real size (the MNIST model's weights, averaged weights and Adam's two moments:
# about 103 MB) goes through tools/gpu/lease.sh train-end with DRY=1 (the averaged weights
# exported, packed into $OUT in parts with a manifest, scored by the CPU engine in the GPU's
# place); what $OUT holds must keep to what a call brings back (8 files, 16 MiB each, 64 MiB), and
# `lease.sh join` must make of it a model folder here that is the exported one bit for bit, holds
# the averaged weights, and scores as the "device" did. Then in BF16 (one part), the last weights
# where the trainer's log says to keep them, and a damaged part is refused with nothing written.
# usage: lease_pack_join_test.sh TARNN SOURCE_DIR
TARNN=$1 SRC=$2
source "$SRC/tests/cli/cli_lib.sh" # PY, the scratch folder $work, bad and the count of failures
cd "$SRC" || exit 1
mkdir -p "$work/lease"
# the stand-in: train.py's checkpoint layout (tools/train.py save()), MNIST-size tensors; the
# averaged weights drawn apart from the last ones, so that a mix-up shows
SRC_TOOLS=$SRC/tools $PY - "$work" <<'PYEOF' || bad "the stand-in checkpoint"
import json, os, sys
import numpy as np
import torch
sys.path.insert(0, os.environ["SRC_TOOLS"])
import tarnn_model as tm
from mnist_data import write_idx
work = sys.argv[1]
write_idx(os.path.join(work, "images"), np.random.default_rng(0).integers(0, 256, (2, 28, 28), dtype=np.uint8))
cfg = dict(tm.MNIST_CONFIG)
torch.manual_seed(1)
model, ema = tm.ImageTransformer(cfg), tm.ImageTransformer(cfg)
moments = {i: {"step": torch.tensor(1000.0), "exp_avg": torch.randn_like(p) * 1e-3,
               "exp_avg_sq": torch.rand_like(p) * 1e-6} for i, p in enumerate(model.parameters())}
meta = {"optimizer_groups": [{"lr": 1e-4, "params": list(moments)}], "history": [],
        "ema_decay": 0.999, "train_file": "stand-in", "args": {}}
torch.save({"format": "tarnn-checkpoint-2", "model_state": model.state_dict(),
            "optimizer_state": moments, "ema_state": ema.state_dict(), "config": cfg,
            "step": 1000, "images_seen": 512000, "meta": json.dumps(meta)},
           os.path.join(work, "lease", "train.pt"))
PYEOF
size=$(stat -c %s "$work/lease/train.pt")
echo "stand-in checkpoint: $size bytes"
[ "$size" -gt 100000000 ] || bad "the stand-in is $size bytes, not the real size (~103 MB)"

# pack_join NAME [ENV...]: train-end in DRY mode into $work/out-NAME, then join it
pack_join() {
  local name=$1 out=$work/out-$1
  shift
  env "$@" DRY=1 OUT="$out" LEASE_DIR="$work/lease" PY="$PY" LEASE_TARNN="$TARNN" \
    LEASE_IMAGES="$work/images" bash tools/gpu/lease.sh train-end >"$work/pack-$name.log" 2>&1 ||
    bad "$name: train-end exited $?: $(tail -3 "$work/pack-$name.log")"
  local n total big
  n=$(find "$out" -type f | wc -l)
  total=$(find "$out" -type f -printf '%s\n' | awk '{ t += $1 } END { print t + 0 }')
  big=$(find "$out" -type f -size +16384k)
  echo "$name: $n files, $total bytes back: $(cd "$out" && ls | tr '\n' ' ')"
  [ "$n" -le 8 ] && [ "$total" -le $((64 << 20)) ] && [ -z "$big" ] ||
    bad "$name: what comes back breaks the limits: $n files, $total bytes, too big: $big"
  find "$out" -type f -printf '%f\n' | grep -qvE '^(log-steps\.txt|train\.log|weights\.json|weights\.part-[0-9]+)$' &&
    bad "$name: unexpected files back: $(ls "$out")"
  LEASE_TARNN="$TARNN" LEASE_IMAGES="$work/images" PY="$PY" bash tools/gpu/lease.sh join "$out" \
    "$work/model-$name" >"$work/join-$name.log" 2>&1 || bad "$name: join exited $?: $(tail -3 "$work/join-$name.log")"
  cat "$work/join-$name.log"
  grep -q "largest difference 0 " "$work/join-$name.log" ||
    bad "$name: the score here is not the device's (the same engine plays both)"
  cmp -s "$work/model-$name/model.safetensors" "$work/lease/m-trained/model.safetensors" ||
    bad "$name: the joined weights are not the exported file, bit for bit"
  cmp -s "$work/model-$name/config.json" "$work/lease/m-trained/config.json" || bad "$name: config.json differs"
}
pack_join f32
parts() { find "$1" -name 'weights.part-*' | wc -l; }
[ "$(parts "$work/out-f32")" -eq 2 ] || bad "F32 weights not in 2 parts"
# the averaged weights came home, exactly: not the last ones, and no optimizer state
SRC_TOOLS=$SRC/tools $PY - "$work" <<'PYEOF' || bad "the joined folder does not hold the checkpoint's averaged weights"
import os, sys
import torch
sys.path.insert(0, os.environ["SRC_TOOLS"])
import tarnn_model as tm
work = sys.argv[1]
ckpt = torch.load(os.path.join(work, "lease", "train.pt"), weights_only=True)
got = tm.load_model_dir(os.path.join(work, "model-f32")).state_dict()
ema, last = ckpt["ema_state"], ckpt["model_state"]
assert all(torch.equal(got[k], ema[k]) for k in ema), "not the averaged weights"
assert not all(torch.equal(got[k], last[k]) for k in last), "the last weights"
print("the joined folder holds the averaged weights, every tensor equal")
PYEOF
# the trainer's end found the last weights better on the held-out digits (tools/train.py)
echo "end: held-out bits/dim the start (step 0) 1.0700, the last weights 1.0500, the averaged 1.0600 (step 1000): keep: last; better than the start" >"$work/lease/train.log"
pack_join bf16 LEASE_WEIGHTS=BF16
[ "$(parts "$work/out-bf16")" -eq 1 ] || bad "BF16 weights not in 1 part"
grep -q "the last weights (train.log), BF16" "$work/pack-bf16.log" || bad "bf16: not said to be the last weights"
SRC_TOOLS=$SRC/tools $PY - "$work" <<'PYEOF' || bad "the joined folder does not hold the checkpoint's last weights"
import os, sys
import torch
sys.path.insert(0, os.environ["SRC_TOOLS"])
import tarnn_model as tm
work = sys.argv[1]
ckpt = torch.load(os.path.join(work, "lease", "train.pt"), weights_only=True)
got = tm.load_model_dir(os.path.join(work, "model-bf16")).state_dict()
last = ckpt["model_state"]
assert all(torch.equal(got[k], last[k].bfloat16().float()) for k in last), "not the last weights"
print("train.log said keep: last: the joined folder holds the last weights in BF16, every tensor")
PYEOF
# a part cut short or changed is refused, and no folder is left
head -c 1000 "$work/out-f32/weights.part-01" >"$work/short" && cp "$work/short" "$work/out-f32/weights.part-01"
LEASE_TARNN="$TARNN" LEASE_IMAGES="$work/images" PY="$PY" bash tools/gpu/lease.sh join "$work/out-f32" \
  "$work/model-bad" >"$work/join-bad.log" 2>&1 && bad "a damaged part was joined"
grep -q "weights.part-01: 1000 bytes, not the" "$work/join-bad.log" || bad "no clear error: $(cat "$work/join-bad.log")"
[ -e "$work/model-bad" ] && bad "a refused join left a folder"
[ -n "$(find "$work" -maxdepth 1 -name '.model-bad*')" ] && bad "a refused join left its staging folder"
[ $fail -eq 0 ] && echo "lease pack and join: ok"
[ $fail -eq 0 ]
