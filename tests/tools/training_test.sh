#!/usr/bin/env bash
# The training pipeline end to end: a tiny model trains a few steps, exports, loads in the engine,
# and the engine's bits/dim equals PyTorch's to 1e-4. Export and the IDX reader refuse bad input.
# usage: training_test.sh TARNN SOURCE_DIR
set -u
TARNN=$1
SRC=$2
PY=${TARNN_PYTHON:-/usr/bin/python3} # ctest sets it to the configured TARNN_TORCH_PYTHON
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0
check() { # check DESCRIPTION CMD...: CMD must succeed
  local what=$1
  shift
  if "$@" >"$work/out" 2>&1; then pass=$((pass + 1)); else
    echo "FAIL: $what: $(tail -3 "$work/out")"
    fail=$((fail + 1))
  fi
}
# Whether this torch's weights-only loader reads FILE: torch 1.13's refuses Python floats, newer
# ones (2.4 on) read them safely, and then no --trust-pickle is needed.
weights_only_reads() { $PY -c "import torch; torch.load('$1', weights_only=True)" 2>/dev/null; }
# needs_trust DESCRIPTION FILE CMD...: CMD (without --trust-pickle) refuses FILE where this torch
# cannot read it weights-only, and succeeds where it can
needs_trust() {
  local what=$1 file=$2
  shift 2
  if weights_only_reads "$file"; then check "$what (read weights-only by this torch)" "$@"
  else refuses "$what" "--trust-pickle" "$@"; fi
}
refuses() { # refuses DESCRIPTION SUBSTRING CMD...: CMD must fail saying SUBSTRING
  local what=$1 want=$2
  shift 2
  if "$@" >"$work/out" 2>&1; then
    echo "FAIL: $what: succeeded"
    fail=$((fail + 1))
  elif grep -qF -- "$want" "$work/out"; then pass=$((pass + 1)); else
    echo "FAIL: $what: no '$want' in: $(tail -2 "$work/out")"
    fail=$((fail + 1))
  fi
}

# tiny 6x6 digits-like data: a bright bar in each image
SRC_TOOLS=$SRC/tools $PY - "$work" <<'PYEOF'
import os, sys
import numpy as np
sys.path.insert(0, os.environ["SRC_TOOLS"])
from mnist_data import write_idx
rng = np.random.default_rng(0)
imgs = np.zeros((40, 6, 6), np.uint8)
for i, im in enumerate(imgs):
    im[rng.integers(0, 6), :] = 255
    im[:, rng.integers(0, 6)] = rng.integers(100, 256)
write_idx(os.path.join(sys.argv[1], "train-idx"), imgs[:32])
write_idx(os.path.join(sys.argv[1], "held-idx"), imgs[32:])
PYEOF
tiny=(--height 6 --width 6 --n-layers 2 --n-heads 2 --d-head 4 --d-model 8 --d-ff 16 --mixtures 2)
check "train 5 steps" $PY "$SRC/tools/train.py" --train "$work/train-idx" --heldout "$work/held-idx" \
  --ckpt "$work/ckpt.pt" "${tiny[@]}" --max-steps 5 --batch 4 --eval-every 1000 --threads 1
cp "$work/ckpt.pt" "$work/ckpt5.pt"
check "resume 3 more steps" $PY "$SRC/tools/train.py" --train "$work/train-idx" --heldout "$work/held-idx" \
  --ckpt "$work/ckpt.pt" --max-steps 8 --batch 4 --eval-every 1000 --threads 1
grep -q "resumed .* at step 5" "$work/out" && ! grep -q easing "$work/out" && pass=$((pass + 1)) ||
  { echo "FAIL: did not resume at step 5, or eased an unchanged schedule"; fail=$((fail + 1)); }
cp "$work/ckpt.pt" "$work/ckpt-fast.pt"
check "resume at a higher rate" $PY "$SRC/tools/train.py" --train "$work/train-idx" --heldout "$work/held-idx" \
  --ckpt "$work/ckpt-fast.pt" --lr 1e-2 --max-steps 9 --batch 4 --eval-every 1000 --threads 1
grep -q "easing the learning rate from .* over 300 steps" "$work/out" && pass=$((pass + 1)) ||
  { echo "FAIL: a changed rate was not eased into"; fail=$((fail + 1)); }
# a resumed run is the run that never stopped: the same weights, bit for bit, after an epoch's
# end (8 steps of 4 images of 32), as the checkpoint holds the data's RNG and place in its epoch
check "resume across an epoch" $PY "$SRC/tools/train.py" --train "$work/train-idx" --heldout "$work/held-idx" \
  --ckpt "$work/ckpt5.pt" --max-steps 11 --batch 4 --eval-every 1000 --threads 1
check "train 11 steps without stopping" $PY "$SRC/tools/train.py" --train "$work/train-idx" --heldout "$work/held-idx" \
  --ckpt "$work/straight.pt" "${tiny[@]}" --max-steps 11 --batch 4 --eval-every 1000 --threads 1
check "the resumed weights are the unstopped run's" $PY -c "
import torch
a = torch.load('$work/ckpt5.pt', weights_only=True)['model_state']
b = torch.load('$work/straight.pt', weights_only=True)['model_state']
bad = [k for k in a if not torch.equal(a[k], b[k])]
assert not bad, f'{len(bad)} tensors differ, first {bad[0]}'"
check "checkpoints load with torch's weights-only loader" $PY -c "
import torch; torch.load('$work/ckpt.pt', weights_only=True)"
# an older checkpoint: a full pickle (floats in the optimizer), one parameter group
$PY -c "
import json, torch; c = torch.load('$work/ckpt.pt', weights_only=True); m = json.loads(c['meta'])
g = m['optimizer_groups']; g[0]['params'] += g[1]['params']; del g[1:]
torch.save({'model_state': c['model_state'], 'optimizer': {'state': c['optimizer_state'], 'param_groups': g},
            'config': c['config'], 'step': c['step'], 'images_seen': c['images_seen'], 'history': m['history']},
           '$work/one-group.pt')"
needs_trust "an older checkpoint without --trust-pickle" "$work/one-group.pt" \
  $PY "$SRC/tools/train.py" --train "$work/train-idx" --heldout "$work/held-idx" \
  --ckpt "$work/one-group.pt" --max-steps 9 --batch 4 --eval-every 1000 --threads 1 --eval-only
check "resume a checkpoint whose optimizer has other parameter groups" $PY "$SRC/tools/train.py" --train "$work/train-idx" \
  --heldout "$work/held-idx" --ckpt "$work/one-group.pt" --max-steps 9 --batch 4 --eval-every 1000 --threads 1 --trust-pickle
weights_only_reads "$work/one-group.pt" || grep -q "warning: .*full pickle" "$work/out" &&
  pass=$((pass + 1)) || { echo "FAIL: no warning for --trust-pickle"; fail=$((fail + 1)); }
# a hostile pickle: loading it would run code (create a file); both tools refuse it, no code runs
$PY -c "
import os, torch
class Evil:
    def __reduce__(self): return (os.system, ('touch $work/pwned',))
torch.save({'model_state': Evil()}, '$work/evil.pt')"
refuses "train.py refuses a pickle that runs code" "not a weights-only file" $PY "$SRC/tools/train.py" --eval-only --ckpt "$work/evil.pt" --heldout "$work/held-idx"
refuses "export.py refuses a pickle that runs code" "not a weights-only file" $PY "$SRC/tools/export.py" "$work/evil.pt" --out "$work/m-evil"
[ -e "$work/pwned" ] && { echo "FAIL: a checkpoint's pickle ran code"; fail=$((fail + 1)); } || pass=$((pass + 1))
check "export" $PY "$SRC/tools/export.py" "$work/ckpt.pt" --out "$work/model"
refuses "--ema without averaged weights" "holds no averaged weights" $PY "$SRC/tools/export.py" "$work/ckpt.pt" --out "$work/m-ema" --ema
check "train with --ema" $PY "$SRC/tools/train.py" --train "$work/train-idx" --heldout "$work/held-idx" \
  --ckpt "$work/ckpt-ema.pt" "${tiny[@]}" --max-steps 4 --batch 4 --eval-every 2 --eval-images 4 --threads 1 --ema 0.5
grep -q "averaged weights" "$work/out" && pass=$((pass + 1)) || { echo "FAIL: --ema evals"; fail=$((fail + 1)); }
check "export --ema" $PY "$SRC/tools/export.py" "$work/ckpt-ema.pt" --out "$work/m-ema" --ema
check "eval --use-ema" $PY "$SRC/tools/train.py" --eval-only --use-ema --ckpt "$work/ckpt-ema.pt" --heldout "$work/held-idx"
ema_torch=$(awk '/heldout bits\/dim/ {print $3}' "$work/out")
check "engine score of averaged weights" "$TARNN" score --model "$work/m-ema" --images "$work/held-idx"
ema_engine=$(awk '/bits\/dim/ {print $2}' "$work/out")
check "averaged weights agree to 1e-4" $PY -c "import sys; sys.exit(not abs($ema_torch - $ema_engine) <= 1e-4)"
check "pytorch fp32 eval" $PY "$SRC/tools/train.py" --eval-only --ckpt "$work/ckpt.pt" --heldout "$work/held-idx"
torch_bpd=$(awk '/heldout bits\/dim/ {print $3}' "$work/out")
check "engine score" "$TARNN" score --model "$work/model" --images "$work/held-idx"
engine_bpd=$(awk '/bits\/dim/ {print $2}' "$work/out")
echo "held-out bits/dim: PyTorch $torch_bpd, engine $engine_bpd"
check "agree to 1e-4" $PY -c "import sys; sys.exit(not abs($torch_bpd - $engine_bpd) <= 1e-4)"

check "--minutes stops and checkpoints" $PY "$SRC/tools/train.py" --train "$work/train-idx" --heldout "$work/held-idx" \
  --ckpt "$work/ckpt-min.pt" "${tiny[@]}" --minutes 0.0001 --batch 4 --eval-every 1000 --threads 1
grep -q "minutes: checkpointing and stopping" "$work/out" && [ -s "$work/ckpt-min.pt" ] && pass=$((pass + 1)) ||
  { echo "FAIL: --minutes"; fail=$((fail + 1)); }
check "learning-rate schedule: warm-up, constant, cosine decay, final" env PYTHONPATH="$SRC/tools" $PY -c "
import sys, types, train
a = types.SimpleNamespace(lr=1e-3, warmup=10, decay_start=100, decay_steps=50, lr_final=1e-4,
                          time_decay=0.0, minutes=0.0)
want = {0: 1e-4, 9: 1e-3, 99: 1e-3, 100: 1e-3, 125: 5.5e-4, 150: 1e-4, 10**6: 1e-4}
got = {s: train.learning_rate(a, s) for s in want}
a.decay_steps = 0
eased = [train.learning_rate(a, s, (200, 1e-5)) for s in (200, 204, 209, 300)]
a.minutes, a.time_decay = 10.0, 0.5  # a time-boxed run: the decay over its last half
clock = [train.learning_rate(a, 10**6, None, e) for e in (0.4, 0.75, 1.0)]
a.minutes, a.time_decay = 0.0, 0.0
sys.exit(not (all(abs(got[s] - want[s]) < 1e-12 for s in want) and train.learning_rate(a, 10**6) == 1e-3
              and all(abs(x - y) < 1e-12 for x, y in zip(eased, (1.09e-4, 5.05e-4, 1e-3, 1e-3)))
              and all(abs(x - y) < 1e-12 for x, y in zip(clock, (1e-3, 5.5e-4, 1e-4)))))"

check "continue from an exported folder" $PY "$SRC/tools/train.py" --train "$work/train-idx" --heldout "$work/held-idx" \
  --ckpt "$work/ckpt2.pt" --init-from "$work/model" --max-steps 2 --batch 4 --eval-every 1000 --threads 1
grep -q "initialised from" "$work/out" && pass=$((pass + 1)) || { echo "FAIL: --init-from"; fail=$((fail + 1)); }

# the paper's checkpoint layouts: a bare state dict, and {"model_state": ...} without a config
$PY -c "
import torch; c = torch.load('$work/ckpt.pt', weights_only=True)
torch.save(c['model_state'], '$work/bare.pt')
torch.save({'model_state': c['model_state'], 'epoch': 3}, '$work/paper.pt')
torch.save({'model_state': c['model_state'], 'epoch': 3, 'optimizer_state': {'lr': 1e-4}}, '$work/paper-opt.pt')
sd = dict(c['model_state']); del sd['transformer.layers.1.norm2.bias']; torch.save(sd, '$work/missing.pt')
sd = dict(c['model_state']); sd['predictor.weight'] = sd['predictor.weight'][:, :7]; torch.save(sd, '$work/misshapen.pt')
sd = dict(c['model_state']); sd['transformer.layers.2.linear1.weight'] = sd['predictor.weight']; torch.save(sd, '$work/extra.pt')
sd = dict(c['model_state']); sd['predictor.bias'] = sd['predictor.bias'].clone(); sd['predictor.bias'][1] = float('nan'); torch.save(sd, '$work/nan.pt')
for name, change in (('reformer', dict(attention='reformer')), ('typo', dict(n_heads_typo=4))):
    torch.save(dict(c, config=dict(c['config'], **change)), f'$work/cfg-{name}.pt')
"
check "export a bare state dict" $PY "$SRC/tools/export.py" "$work/bare.pt" --out "$work/m2" --config mnist "${tiny[@]}"
check "same tensors as from our checkpoint" env PYTHONPATH="$SRC/tools" $PY -c "
import sys, torch, tarnn_model as tm
a, b = (tm.read_safetensors(f'$work/{m}/model.safetensors') for m in ('model', 'm2'))
sys.exit(not (a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)))"
check "export the paper's main.py layout" $PY "$SRC/tools/export.py" "$work/paper.pt" --out "$work/m3" --config mnist "${tiny[@]}"
needs_trust "the paper's file with optimizer floats, untrusted" "$work/paper-opt.pt" \
  $PY "$SRC/tools/export.py" "$work/paper-opt.pt" --out "$work/m3b" --config mnist "${tiny[@]}"
check "the paper's file with optimizer floats, trusted" $PY "$SRC/tools/export.py" "$work/paper-opt.pt" --out "$work/m3b" --config mnist "${tiny[@]}" --trust-pickle
refuses "no config given" "holds no config" $PY "$SRC/tools/export.py" "$work/bare.pt" --out "$work/m4"
refuses "missing tensor" "missing tensor transformer.layers.1.norm2.bias" $PY "$SRC/tools/export.py" "$work/missing.pt" --out "$work/m5" --config mnist "${tiny[@]}"
refuses "misshapen tensor" "tensor predictor.weight has shape [6, 7], the config wants [6, 8]" $PY "$SRC/tools/export.py" "$work/misshapen.pt" --out "$work/m6" --config mnist "${tiny[@]}"
refuses "extra tensor" "unexpected tensor transformer.layers.2.linear1.weight" $PY "$SRC/tools/export.py" "$work/extra.pt" --out "$work/m7" --config mnist "${tiny[@]}"
refuses "wrong size for the paper's model" "has shape" $PY "$SRC/tools/export.py" "$work/bare.pt" --out "$work/m8" --config mnist
refuses "non-finite weights" "tensor predictor.bias holds a non-finite value" $PY "$SRC/tools/export.py" "$work/nan.pt" --out "$work/m9" --config mnist "${tiny[@]}"
refuses "an attention the engine lacks" "attention 'reformer' is not supported (linear or softmax)" $PY "$SRC/tools/export.py" "$work/cfg-reformer.pt" --out "$work/m10"
refuses "an unknown config key" "unknown config key 'n_heads_typo' (did you mean 'n_heads'?)" $PY "$SRC/tools/export.py" "$work/cfg-typo.pt" --out "$work/m11"
[ -e "$work/m5" ] || [ -e "$work/m6" ] || [ -e "$work/m9" ] || [ -e "$work/m10" ] || [ -e "$work/m11" ] && { echo "FAIL: a refused export wrote files"; fail=$((fail + 1)); } || pass=$((pass + 1))

# IDX files: truncated, trailing bytes, not IDX
head -c 200 "$work/train-idx" >"$work/trunc-idx"
refuses "train on truncated IDX" "truncated" $PY "$SRC/tools/train.py" --train "$work/trunc-idx" --heldout "$work/held-idx" --ckpt "$work/c2.pt" "${tiny[@]}"
cat "$work/held-idx" <(printf 'xx') >"$work/long-idx"
refuses "IDX with trailing bytes" "trailing bytes" $PY "$SRC/tools/train.py" --eval-only --ckpt "$work/ckpt.pt" --heldout "$work/long-idx"
printf 'PK\003\004garbage' >"$work/not-idx"
refuses "not IDX" "not an unsigned-byte IDX file" $PY "$SRC/tools/train.py" --eval-only --ckpt "$work/ckpt.pt" --heldout "$work/not-idx"
refuses "engine: truncated IDX" "truncated" "$TARNN" score --model "$work/model" --images "$work/trunc-idx"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
