#!/usr/bin/python3
"""Export a PyTorch checkpoint to a tarnn model folder (config.json + model.safetensors).

    tools/export.py checkpoints/mnist.pt --out models/mnist
    tools/export.py paper_mnist.pth --out models/paper --config mnist     # the paper's files

Accepts
  - train.py's checkpoints: {"model_state": state_dict, "config": {...}, ...};
  - the paper's main.py checkpoints: {"model_state": state_dict, ...} (no config: give --config
    and the size flags);
  - bare state dicts, as the paper's colab saves them (value_embedding.weight,
    pos_embedding.pe [1, L, d_model/2], transformer.layers.*, transformer.norm.*, predictor.*).
Every key and shape is checked against the config; a missing, extra or misshapen tensor, a
non-finite value, a config key, attention or activation the engine does not know is an error that
names it, and nothing is written.

A .pt/.pth checkpoint is a Python pickle, and a pickle can run code its author put in it. This
tool reads with torch's weights-only loader, which runs none: train.py's checkpoints load so.
Files it refuses (the paper's, whose optimizer state holds floats that torch 1.13's weights-only
loader rejects; train.py's before 2026-11-22) need --trust-pickle: give it only for files you
trust. The engine itself never reads pickles: model.safetensors is plain data.
"""

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tarnn_model as tm  # noqa: E402


def fail(msg):
    sys.exit(f"export: {msg}")


def load_checkpoint(path, trust_pickle):
    try:
        ckpt = tm.load_pt(path, trust_pickle)
    except (OSError, PermissionError) as e:
        fail(str(e))
    except Exception as e:  # torch raises many kinds; all mean the same to the user
        fail(f"{path}: cannot load as a PyTorch checkpoint: {e}")
    if isinstance(ckpt, dict) and isinstance(ckpt.get("meta"), str):  # train.py's floats
        ckpt = dict(ckpt, **{k: v for k, v in json.loads(ckpt["meta"]).items()
                             if k in ("ema_decay", "history")})
    if isinstance(ckpt, dict) and "model_state" in ckpt:
        return ckpt["model_state"], ckpt.get("config"), ckpt
    if isinstance(ckpt, dict) and all(isinstance(v, torch.Tensor) for v in ckpt.values()):
        return ckpt, None, {}
    fail(f"{path}: neither a state dict nor a checkpoint with 'model_state'")


def check_state(state, cfg):
    """Strict comparison with the model the config describes: every difference, named."""
    want = {k: tuple(v.shape) for k, v in tm.ImageTransformer(cfg).state_dict().items()}
    have = {k: tuple(v.shape) for k, v in state.items()}
    problems = [f"missing tensor {k} {list(s)}" for k, s in want.items() if k not in have]
    problems += [f"unexpected tensor {k} {list(s)}" for k, s in have.items() if k not in want]
    problems += [f"tensor {k} has shape {list(have[k])}, the config wants {list(s)}"
                 for k, s in want.items() if k in have and have[k] != s
                 and not (k == "pos_embedding.pe" and have[k] == s[1:])]
    if problems:
        fail("; ".join(problems))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--out", required=True, help="model folder to write")
    ap.add_argument("--config", help="mnist, or a config.json, for checkpoints without one")
    for key, val in tm.MNIST_CONFIG.items():
        ap.add_argument("--" + key.replace("_", "-"), type=type(val), default=None,
                        help=f"override {key} of --config")
    ap.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"])
    ap.add_argument("--ema", action="store_true",
                    help="export train.py's averaged weights (its --ema) instead of the last ones")
    ap.add_argument("--trust-pickle", action="store_true",
                    help="load a checkpoint that is a full pickle (the paper's, or train.py's "
                         "before 2026-11-22): it can run code, so only a file you trust")
    args = ap.parse_args()

    state, cfg, ckpt = load_checkpoint(args.checkpoint, args.trust_pickle)
    if args.ema:
        if "ema_state" not in ckpt:
            fail(f"{args.checkpoint}: --ema, but the checkpoint holds no averaged weights")
        state = ckpt["ema_state"]
    if cfg is None:
        if not args.config:
            fail(f"{args.checkpoint} holds no config: give --config mnist (or a config.json)")
        if args.config == "mnist":
            cfg = dict(tm.MNIST_CONFIG)
        else:
            try:
                with open(args.config) as f:
                    cfg = json.load(f)
            except (OSError, ValueError) as e:
                fail(f"--config {args.config}: {e}")
            if not isinstance(cfg, dict):
                fail(f"--config {args.config}: not a JSON object")
    cfg = {k: v for k, v in cfg.items() if k not in tm.FILE_KEYS}
    for key in tm.MNIST_CONFIG:
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    try:
        tm.check_config(cfg)
    except ValueError as e:
        fail(f"{args.config or args.checkpoint}: {e}")

    check_state(state, cfg)
    for key, tensor in state.items():
        if not torch.isfinite(tensor.float()).all():
            fail(f"tensor {key} holds a non-finite value (NaN or infinity): the engine refuses it")
    model = tm.ImageTransformer(cfg)
    state = dict(state)
    if state["pos_embedding.pe"].dim() == 2:
        state["pos_embedding.pe"] = state["pos_embedding.pe"][None]
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
    meta = {"source": os.path.basename(args.checkpoint)}
    for key in ("step", "images_seen"):
        if key in ckpt:
            meta[key] = ckpt[key]
    if args.ema:
        meta["weights"] = f"exponential moving average, decay {ckpt.get('ema_decay')}"
    tm.save_model_dir(model, args.out, meta, args.dtype)
    print(f"exported {args.checkpoint} -> {args.out} ({tm.param_count(cfg)} parameters, "
          f"{args.dtype})")


if __name__ == "__main__":
    main()
