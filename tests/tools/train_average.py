#!/usr/bin/python3
"""tools/train.py's averaged weights are the average: a tiny model trains a few steps in this
process, every step's weights are kept (the optimizer's step wrapped), and the checkpoint's
'ema_state' must equal e_0 = w_0, e_k = d e_{k-1} + (1 - d) w_k over them, tensor by tensor by
name; with --ema-from-decay the average starts again at the first step of the rate's decay
(e = w there). The log holds the start's held-out figure and the end's, and which weights to keep.
    train_average.py FOLDER   (FOLDER: tiny_images.py's train-idx and held-idx)"""
import contextlib
import io
import os
import sys

import torch

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
sys.path.insert(0, TOOLS)
import tarnn_model as tm  # noqa: E402
import train  # noqa: E402

work = sys.argv[1]
TINY = ["--height", "6", "--width", "6", "--n-layers", "2", "--n-heads", "2", "--d-head", "4",
        "--d-model", "8", "--d-ff", "16", "--mixtures", "2"]
DECAY, STEPS = 0.8, 12


def run(name, *extra):
    """Trains STEPS steps; returns (every step's weights by name, w_0 first; the checkpoint; log)."""
    models, weights = [], []
    real_init, real_step = tm.ImageTransformer.__init__, torch.optim.AdamW.step

    def init(self, cfg):
        real_init(self, cfg)
        models.append(self)  # the first is the model trained, the second its average

    def step(self, *a, **k):
        if not weights:
            weights.append(named(models[0]))
        out = real_step(self, *a, **k)
        weights.append(named(models[0]))
        return out

    sys.argv = ["train.py", "--train", f"{work}/train-idx", "--heldout", f"{work}/held-idx",
                "--ckpt", f"{work}/{name}.pt", *TINY, "--batch", "4", "--lr", "0.01",
                "--warmup", "1", "--ema", str(DECAY), "--max-steps", str(STEPS), "--eval-every",
                "5", "--eval-images", "8", "--threads", "1", *extra]
    tm.ImageTransformer.__init__, torch.optim.AdamW.step = init, step
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log):
            train.main(train.parse_args())
    finally:
        tm.ImageTransformer.__init__, torch.optim.AdamW.step = real_init, real_step
    return weights, torch.load(f"{work}/{name}.pt"), log.getvalue()


def named(model):
    return {n: p.detach().double().clone() for n, p in model.named_parameters()}


def average(weights, first=0):
    """The recursion from weights[first] (the start, or the decay's first step) on, in float64."""
    e = dict(weights[first])
    for w in weights[first + 1:]:
        e = {n: DECAY * e[n] + (1 - DECAY) * w[n] for n in e}
    return e


def largest_gap(a, b):
    return max((a[n].double() - b[n].double()).abs().max().item() for n in a)


fail = 0


def check(ok, what):
    global fail
    print(("ok: " if ok else "FAIL: ") + what)
    fail |= not ok


weights, ckpt, log = run("whole")
check(len(weights) == STEPS + 1, f"{len(weights)} weights kept, for {STEPS} steps and the start")
got = {n: t for n, t in ckpt["ema_state"].items() if n in weights[0]}
want = average(weights)
gap, moved = largest_gap(got, want), largest_gap(weights[-1], weights[0])
check(gap < 1e-6 and moved > 1e-2, f"the average over all {STEPS} steps: largest difference "
      f"{gap:.2e} from the recursion (the weights moved up to {moved:.3f})")
check("step 0 heldout bits/dim" in log and "the start)" in log, "the start's held-out figure")
check("\nend: held-out bits/dim the start (step 0)" in log and "keep: " in log,
      "the end's figures and which weights to keep: "
      + next((ln for ln in log.splitlines() if ln.startswith("end:")), "none"))

# the decay begins at step 6 (the 7th update): the average starts again from the weights after it
weights, ckpt, log = run("from_decay", "--ema-from-decay", "--decay-start", "6",
                         "--decay-steps", "6")
got = {n: t for n, t in ckpt["ema_state"].items() if n in weights[0]}
gap, whole = largest_gap(got, average(weights, 7)), largest_gap(got, average(weights))
check(gap < 1e-6 and whole > 1e-3, f"--ema-from-decay: the average from the decay's first step: "
      f"largest difference {gap:.2e} (from the whole run's average: {whole:.2e})")
check("step 7: the rate's decay has begun: the average starts again" in log, "said at step 7")
sys.exit(fail)
