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

# refuses_py DESCRIPTION SUBSTRING TOOL.py ARGS...: the tool must fail saying SUBSTRING; queued, and
# run with the others in one Python by refusals.py (below), which saves a torch start-up each
refuses_py() {
  $PY -c 'import json, sys; print(json.dumps({"what": sys.argv[1], "want": sys.argv[2], "argv": sys.argv[3:]}))' \
    "$@" >>"$work/refusals.jsonl"
}
# refuses_py_line: the same, and what the tool prints is that one line and nothing else
refuses_py_line() {
  $PY -c 'import json, sys; print(json.dumps({"what": sys.argv[1], "want": sys.argv[2], "argv": sys.argv[3:], "one_line": True}))' \
    "$@" >>"$work/refusals.jsonl"
}

# tiny 6x6 digits-like data: a bright bar in each image
$PY "$SRC/tests/tools/tiny_images.py" "$work"
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
# hostile checkpoints: loading one would run code or extract files (each would create
# $work/pwned); both tools refuse each in one line, and no code runs (checked after the refusals)
$PY "$SRC/tests/tools/hostile_checkpoints.py" "$work" "$work/pwned"
refuses_py "train.py refuses a pickle that runs code" "not a weights-only file" "$SRC/tools/train.py" --eval-only --ckpt "$work/evil.pt" --heldout "$work/held-idx"
refuses_py "export.py refuses a pickle that runs code" "not a weights-only file" "$SRC/tools/export.py" "$work/evil.pt" --out "$work/m-evil"
ts_refusal="is a TorchScript archive (it holds constants.pkl): torch.load would run its code whatever weights_only says"
refuses_py_line "train.py refuses a TorchScript archive" "train: $work/evil-ts.pt $ts_refusal" "$SRC/tools/train.py" --eval-only --ckpt "$work/evil-ts.pt" --heldout "$work/held-idx"
refuses_py_line "export.py refuses a TorchScript archive" "export: $work/evil-ts.pt $ts_refusal" "$SRC/tools/export.py" "$work/evil-ts.pt" --out "$work/m-evil"
refuses_py_line "export.py refuses a TorchScript archive under another folder" "export: $work/evil-ts-folder.pt $ts_refusal" "$SRC/tools/export.py" "$work/evil-ts-folder.pt" --out "$work/m-evil"
refuses_py_line "export.py refuses torch's legacy tar format" "is in torch's legacy tar format" "$SRC/tools/export.py" "$work/evil-tar.pt" --out "$work/m-evil"
# --data: verified on held-out images, engine against PyTorch float64, before the folder is written
check "export, verified" $PY "$SRC/tools/export.py" "$work/ckpt.pt" --out "$work/model" --data "$work/held-idx" --tarnn "$TARNN"
verified=$(sed -n 's/.*verified on 8 images: .*max difference from PyTorch \([0-9.e+-]*\).*/\1/p' "$work/out")
echo "export --verify: max difference ${verified:-none} bits/dim"
[ -n "$verified" ] && $PY -c "import sys; sys.exit(not $verified < 1e-4)" && ! grep -q assuming "$work/out" &&
  pass=$((pass + 1)) || { echo "FAIL: export --verify printed no max difference below 1e-4: $(cat "$work/out")"; fail=$((fail + 1)); }
refuses_py "--ema without averaged weights" "holds no averaged weights" "$SRC/tools/export.py" "$work/ckpt.pt" --out "$work/m-ema" --ema
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
grep -qx "export: assuming linear attention with the elu+1 feature map (the paper's); give --attention/--feature-map if the model was trained otherwise" "$work/out" &&
  pass=$((pass + 1)) || { echo "FAIL: no assumption line for a checkpoint without attention: $(cat "$work/out")"; fail=$((fail + 1)); }
check "same tensors as from our checkpoint" env PYTHONPATH="$SRC/tools" $PY -c "
import sys, torch, tarnn_model as tm
a, b = (tm.read_safetensors(f'$work/{m}/model.safetensors') for m in ('model', 'm2'))
sys.exit(not (a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)))"
check "export the paper's main.py layout" $PY "$SRC/tools/export.py" "$work/paper.pt" --out "$work/m3" --config mnist "${tiny[@]}"
needs_trust "the paper's file with optimizer floats, untrusted" "$work/paper-opt.pt" \
  $PY "$SRC/tools/export.py" "$work/paper-opt.pt" --out "$work/m3b" --config mnist "${tiny[@]}"
check "the paper's file with optimizer floats, trusted" $PY "$SRC/tools/export.py" "$work/paper-opt.pt" --out "$work/m3b" --config mnist "${tiny[@]}" --trust-pickle
refuses_py "no config given" "holds no config" "$SRC/tools/export.py" "$work/bare.pt" --out "$work/m4"
refuses_py "missing tensor" "missing tensor transformer.layers.1.norm2.bias" "$SRC/tools/export.py" "$work/missing.pt" --out "$work/m5" --config mnist "${tiny[@]}"
refuses_py "misshapen tensor" "tensor predictor.weight has shape [6, 7], the config wants [6, 8]" "$SRC/tools/export.py" "$work/misshapen.pt" --out "$work/m6" --config mnist "${tiny[@]}"
refuses_py "extra tensor" "unexpected tensor transformer.layers.2.linear1.weight" "$SRC/tools/export.py" "$work/extra.pt" --out "$work/m7" --config mnist "${tiny[@]}"
refuses_py "wrong size for the paper's model" "has shape" "$SRC/tools/export.py" "$work/bare.pt" --out "$work/m8" --config mnist
refuses_py "non-finite weights" "tensor predictor.bias holds a non-finite value" "$SRC/tools/export.py" "$work/nan.pt" --out "$work/m9" --config mnist "${tiny[@]}"
refuses_py "an attention without a recurrent form" "attention 'reformer' has no recurrent form: its keys are its normalised queries" "$SRC/tools/export.py" "$work/cfg-reformer.pt" --out "$work/m10"
refuses_py "an unknown config key" "unknown config key 'n_heads_typo' (did you mean 'n_heads'?)" "$SRC/tools/export.py" "$work/cfg-typo.pt" --out "$work/m11"

# Attention and feature maps (docs/SPEC.md section 1): a checkpoint of each kind made by the
# reference model, omega drawn with a seed; configs hold no floats (the library's defaults fill
# in), so torch 1.13's weights-only loader reads them
SRC_TOOLS=$SRC/tools $PY - "$work" <<'PYEOF'
import os, sys, torch
sys.path.insert(0, os.environ["SRC_TOOLS"])
import random_model as rm
w = sys.argv[1]
tiny = dict(height=6, width=6, channels=1, n_layers=2, n_heads=2, d_head=4, d_model=8, d_ff=16,
            activation="relu", mixtures=2, attention="linear")
kinds = {"elu+1": {"kind": "elu+1"}, "relu": {"kind": "relu"},
         "random_fourier": {"kind": "random_fourier"},
         "smoothed_random_fourier": {"kind": "smoothed_random_fourier", "n_dims": 7},
         "favor": {"kind": "favor", "n_dims": 6},
         "generalized_random": {"kind": "generalized_random", "kernel_fn": "elu+1"}}
omega = "transformer.layers.1.attention.inner_attention.feature_map.omega"
for name, fm in kinds.items():
    m = rm.random_model(dict(tiny, feature_map=fm), 1)
    torch.save({"model_state": m.state_dict(), "config": dict(tiny, feature_map=fm)},
               f"{w}/fm-{name}.pt")
    if name == "favor":  # the paper's layout: no config
        sd = m.state_dict()
        torch.save(sd, f"{w}/favor-bare.pt")
        torch.save({k: v for k, v in sd.items() if k != omega}, f"{w}/favor-no-omega.pt")
    if name == "smoothed_random_fourier":  # n_dims 7: its omega [4, 3] fits 8 as well
        torch.save(m.state_dict(), f"{w}/smoothed-bare.pt")
sm = rm.random_model(dict(tiny, attention="softmax"), 1).state_dict()
torch.save({"model_state": sm, "config": dict(tiny, attention="softmax")}, f"{w}/fm-softmax.pt")
torch.save(sm, f"{w}/softmax-bare.pt")
PYEOF
# every kind the reference model makes, exported with --verify: the engine agrees with PyTorch's
# float64 bits/dim to 1e-4 on held-out images (the feature maps on S of F x d_head, softmax on its
# KV cache)
for kind in elu+1 relu random_fourier smoothed_random_fourier favor generalized_random softmax; do
  check "export a $kind checkpoint, verified" $PY "$SRC/tools/export.py" "$work/fm-$kind.pt" --out "$work/fm-$kind" \
    --data "$work/held-idx" --verify 4 --tarnn "$TARNN"
  ! grep -q assuming "$work/out" && pass=$((pass + 1)) || { echo "FAIL: $kind: assumed what the config records"; fail=$((fail + 1)); }
  d=$(sed -n 's/.*max difference from PyTorch \([0-9.e+-]*\).*/\1/p' "$work/out")
  echo "export --verify $kind: max difference ${d:-none} bits/dim"
  [ -n "$d" ] && $PY -c "import sys; sys.exit(not $d < 1e-4)" && pass=$((pass + 1)) ||
    { echo "FAIL: $kind --verify printed no max difference below 1e-4: $(cat "$work/out")"; fail=$((fail + 1)); }
done
# the kind alone: n_dims (6, not d_head's 4) from the stored omega's shape [4, 3]
check "export the paper's layout with --feature-map KIND" $PY "$SRC/tools/export.py" "$work/favor-bare.pt" --out "$work/fm-favor-flag" \
  --config mnist "${tiny[@]}" --feature-map favor
check "export the paper's layout with --attention full (softmax)" $PY "$SRC/tools/export.py" "$work/softmax-bare.pt" --out "$work/fm-softmax-flag" \
  --config mnist "${tiny[@]}" --attention full
! grep -q assuming "$work/out" && pass=$((pass + 1)) || { echo "FAIL: assumed with --attention given"; fail=$((fail + 1)); }
check "each folder records its attention and feature map, and omega exactly where the map draws one" env PYTHONPATH="$SRC/tools" $PY -c "
import json, sys, torch, tarnn_model as tm
w = '$work'
want = {'elu+1': {'kind': 'elu+1'}, 'relu': {'kind': 'relu'},
        'random_fourier': {'kind': 'random_fourier', 'n_dims': 4, 'softmax_temp': 0.5},
        'smoothed_random_fourier': {'kind': 'smoothed_random_fourier', 'n_dims': 7, 'softmax_temp': 0.5, 'smoothing': 1.0},
        'favor': {'kind': 'favor', 'n_dims': 6, 'softmax_temp': 0.5},
        'generalized_random': {'kind': 'generalized_random', 'n_dims': 4, 'softmax_temp': 1.0, 'kernel_fn': 'elu+1'},
        'softmax': None}
columns = {'random_fourier': 2, 'smoothed_random_fourier': 3, 'favor': 3, 'generalized_random': 4}
bad = []
for kind, fm in list(want.items()) + [('favor-flag', want['favor']), ('softmax-flag', None)]:
    cfg = json.load(open(f'{w}/fm-{kind}/config.json'))
    if cfg['attention'] != ('softmax' if fm is None else 'linear') or cfg.get('feature_map') != fm:
        bad.append(f'{kind}: config.json has {cfg}')
    have = tm.read_safetensors(f'{w}/fm-{kind}/model.safetensors')
    base = kind.replace('-flag', '')  # the flags' exports hold the same tensors
    ckpt = torch.load(f'{w}/fm-{base}.pt', weights_only=True)['model_state']
    omegas = sorted(k for k in have if 'omega' in k)
    c = columns.get(base, 0)
    names = [f'transformer.layers.{i}.attention.inner_attention.feature_map.omega' for i in range(2)] if c else []
    if omegas != names or any(list(have[k].shape) != [4, c] or not torch.equal(have[k], ckpt[k]) for k in names):
        bad.append(f'{kind}: omega tensors {omegas}')
sys.exit('; '.join(bad) or None)"
refuses_py "an unknown attention" "unknown attention 'performer': tarnn runs linear" "$SRC/tools/export.py" "$work/bare.pt" --out "$work/m12" --config mnist "${tiny[@]}" --attention performer
refuses_py "an unknown feature map" "feature map 'cosine' is not supported (elu+1, relu," "$SRC/tools/export.py" "$work/bare.pt" --out "$work/m13" --config mnist "${tiny[@]}" --feature-map cosine
refuses_py "Favor(stabilize=True)" "Favor(stabilize=True) is not supported" "$SRC/tools/export.py" "$work/favor-bare.pt" --out "$work/m14" \
  --config mnist "${tiny[@]}" --feature-map '{"kind": "favor", "n_dims": 6, "stabilize": true}'
refuses_py "a random-feature map without its omega" "the favor feature map draws an omega [d_head, 3] per layer, and the checkpoint lacks transformer.layers.1.attention.inner_attention.feature_map.omega" \
  "$SRC/tools/export.py" "$work/favor-no-omega.pt" --out "$work/m15" --config mnist "${tiny[@]}" --feature-map '{"kind": "favor", "n_dims": 6}'
refuses_py "an omega without a random-feature map" "holds transformer.layers.0.attention.inner_attention.feature_map.omega [4, 3], a random-feature map's omega, but the model has the elu+1 feature map, assumed, which draws none: give --feature-map KIND, the kind it was trained with (random_fourier, smoothed_random_fourier, favor or generalized_random): the checkpoint does not say it; n_dims it does, in omega's shape" \
  "$SRC/tools/export.py" "$work/favor-bare.pt" --out "$work/m16" --config mnist "${tiny[@]}"
refuses_py "smoothed_random_fourier's n_dims, left open by omega's shape" "--feature-map smoothed_random_fourier: omega [4, 3] fits n_dims 7 and 8, and the checkpoint does not say which (they weigh the cos and sin features against the smoothing one differently): give --feature-map '{\"kind\": \"smoothed_random_fourier\", \"n_dims\": 7}' or 8" \
  "$SRC/tools/export.py" "$work/smoothed-bare.pt" --out "$work/m20" --config mnist "${tiny[@]}" --feature-map smoothed_random_fourier
refuses_py "a flag contradicting the recorded feature map" "contradicts $work/fm-elu+1.pt, which records {\"kind\": \"elu+1\"}" \
  "$SRC/tools/export.py" "$work/fm-elu+1.pt" --out "$work/m17" --feature-map relu
# --verify refuses what the engine does not match: here an "engine" that prints other numbers
printf '#!/bin/sh\necho "{\\"per_image\\": [1, 1, 1, 1]}"\n' >"$work/wrong-tarnn" && chmod +x "$work/wrong-tarnn"
refuses_py "--verify against an engine that disagrees" "the export is refused and nothing is written" \
  "$SRC/tools/export.py" "$work/ckpt.pt" --out "$work/m18" --data "$work/held-idx" --verify 4 --tarnn "$work/wrong-tarnn"
# an engine that cannot run the model: its reason, and no folder
printf '#!/bin/sh\necho "tarnn: error: cannot run this model" >&2\nexit 1\n' >"$work/refusing-tarnn" && chmod +x "$work/refusing-tarnn"
refuses_py "--verify with an engine that refuses the model" "the engine cannot run the exported model, so it is not written: tarnn: error: cannot run this model" \
  "$SRC/tools/export.py" "$work/fm-relu.pt" --out "$work/m19" --data "$work/held-idx" --tarnn "$work/refusing-tarnn"

# IDX files: truncated, trailing bytes, not IDX
head -c 200 "$work/train-idx" >"$work/trunc-idx"
refuses_py "train on truncated IDX" "truncated" "$SRC/tools/train.py" --train "$work/trunc-idx" --heldout "$work/held-idx" --ckpt "$work/c2.pt" "${tiny[@]}"
cat "$work/held-idx" <(printf 'xx') >"$work/long-idx"
refuses_py "IDX with trailing bytes" "trailing bytes" "$SRC/tools/train.py" --eval-only --ckpt "$work/ckpt.pt" --heldout "$work/long-idx"
printf 'PK\003\004garbage' >"$work/not-idx"
refuses_py "not IDX" "not an unsigned-byte IDX file" "$SRC/tools/train.py" --eval-only --ckpt "$work/ckpt.pt" --heldout "$work/not-idx"
refuses "engine: truncated IDX" "truncated" "$TARNN" score --model "$work/model" --images "$work/trunc-idx"

# the queued refusals, then what none of them may have done: run code, write a folder, leave one
$PY "$SRC/tests/tools/refusals.py" "$work/refusals.jsonl" >"$work/refusals" 2>&1
grep '^FAIL' "$work/refusals"
counts=($(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$work/refusals"))
[ ${#counts[@]} -eq 2 ] || { echo "FAIL: refusals.py: $(tail -3 "$work/refusals")"; counts=(0 1); }
pass=$((pass + counts[0])) fail=$((fail + counts[1]))
[ -e "$work/pwned" ] && { echo "FAIL: a checkpoint's pickle ran code"; fail=$((fail + 1)); } || pass=$((pass + 1))
refused=0
for m in m-evil m5 m6 m9 m10 m11 m12 m13 m14 m15 m16 m17 m18 m19 m20; do [ -e "$work/$m" ] && { echo "FAIL: a refused export wrote $m"; refused=1; }; done
hidden=$(ls -A "$work" | grep '^\.') && { echo "FAIL: left behind: $hidden"; refused=1; } # staging folders
[ $refused -eq 0 ] && pass=$((pass + 1)) || fail=$((fail + 1))

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
