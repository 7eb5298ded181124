#!/usr/bin/python3
"""Train the SPEC image transformer on IDX files with the discretized-logistic loss.

    tools/train.py --train data/mnist/train-images-idx3-ubyte \
                   --heldout data/mnist/valid-images-idx3-ubyte --ckpt checkpoints/mnist.pt

Resumes from --ckpt when it exists, logs train and held-out bits/dim, checkpoints every
--ckpt-minutes and on SIGINT/SIGTERM, then exits cleanly. Checkpoints hold tensors, ints and
strings only (floats as JSON), so they load with torch's weights-only loader: no pickle code runs. On a CPU it runs under bf16 autocast
(about 3.5x faster than fp32 here); on a GPU when there is one. The checkpoint is
{"model_state": state_dict, "config": ..., ...}, the layout export.py reads.

    tools/train.py --eval-only --ckpt checkpoints/mnist.pt --heldout FILE   (fp32, every image)

On a lent GPU (tools/gpu/lease.sh): --compile compiles the model with torch.compile where this
torch has it; its first steps, where the compiling happens, run under a watchdog, and a compile
that fails or takes more than --compile-timeout seconds is dropped: that step is done again in
eager mode and training goes on (a lease must not lose its minutes to a compiler). --rate-seconds
measures images/s over the first seconds after compiling (evals and checkpoints left out) and
writes it to --rate-file. The environment variable TARNN_TRAIN_COMPILE=fail|hang puts a stand-in
in torch.compile's place that fails, or never finishes, at its first step: how the watchdog is
tested on a CPU and on torches without torch.compile (tests/tools/train_modes_test.sh).
"""

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_config import MNIST_CONFIG  # noqa: E402  (plain data: the flags, without torch)


def files_args(ap):
    """The images, the checkpoint, and a new model's sizes."""
    ap.add_argument("--train", help="training images (IDX)")
    ap.add_argument("--heldout", help="held-out images (IDX)")
    ap.add_argument("--ckpt", required=True, help="checkpoint file (resumed when it exists)")
    for key, val in MNIST_CONFIG.items():
        ap.add_argument("--" + key.replace("_", "-"), type=type(val), default=val,
                        help=f"model {key} (default {val}; ignored when resuming)")


def rate_args(ap):
    """The batch and the learning rate: its value, the head's multiple, its warm-up."""
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-4,
                    help="Adam learning rate (the paper's is 1e-4 at batch 10; here, batch 16, the "
                         "train loss stalled at 1e-4 and fell steadily at 3e-4; a high rate's "
                         "weights read worse by their noise until the rate decays or --ema)")
    ap.add_argument("--head-lr-mult", type=float, default=1.0,
                    help="learning rate multiplier for the output head (predictor)")
    ap.add_argument("--warmup", type=int, default=300, help="linear warm-up steps")
    ap.add_argument("--ref-batch", type=int, default=0, metavar="N",
                    help="--lr and --warmup are tuned for batch N: scale the rate by "
                         "sqrt(batch / N) and the warm-up to the same number of images (a GPU's "
                         "larger batch; 0: as given). Not for continuing a trained model: 64 to "
                         "512 made 1.5e-4 4.24e-4 and 200 warm-up steps 25, and the lease of "
                         "2026-11-25 made models/mnist worse (docs/CUDA.md, On a lent GPU)")


def compile_args(ap):
    """A lease's: torch.compile under its watchdog, and the measured rate."""
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the model where this torch has it (2.x; 1.13 runs "
                         "without, saying so)")
    ap.add_argument("--compile-timeout", type=float, default=120.0, metavar="SECONDS",
                    help="--compile: the first steps (where torch.compile compiles) may take this "
                         "long in all; a compile that fails or runs longer is dropped and training "
                         "goes on in eager mode from the same step (default 120)")
    ap.add_argument("--rate-seconds", type=float, default=0.0, metavar="S",
                    help="measure images/s over the first S seconds of training after compiling "
                         "(evals and checkpoints left out), print it and write --rate-file")
    ap.add_argument("--rate-file", metavar="JSON", help="where --rate-seconds writes its figure")


def schedule_args(ap):
    """The gradient's clip, how long the run goes, and the rate's decay."""
    ap.add_argument("--clip", type=float, default=1.0, help="gradient norm clip")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: never)")
    ap.add_argument("--minutes", type=float, default=0.0,
                    help="stop (and checkpoint) after this many minutes of this run (0: never)")
    ap.add_argument("--end-at", type=float, default=0.0, metavar="UNIX_TIME",
                    help="stop (and checkpoint) at this time: --minutes becomes the time from the "
                         "start of training to it, so --time-decay ends there (a lease's plan)")
    ap.add_argument("--decay-start", type=int, default=0, metavar="STEP",
                    help="step at which a cosine decay of the learning rate to --lr-final begins")
    ap.add_argument("--decay-steps", type=int, default=0,
                    help="length of that decay in steps (0: constant learning rate after warm-up)")
    ap.add_argument("--lr-final", type=float, default=0.0,
                    help="learning rate at the end of the decay and after it")
    ap.add_argument("--time-decay", type=float, default=0.0, metavar="FRACTION",
                    help="with --minutes: cosine decay to --lr-final over this last fraction of "
                         "the time")


def run_args(ap):
    """Checkpoints, evals, threads, numerics, the seed."""
    ap.add_argument("--ckpt-minutes", type=float, default=5.0)
    ap.add_argument("--eval-every", type=int, default=200, help="steps between held-out evals")
    ap.add_argument("--eval-images", type=int, default=200, help="held-out images per eval")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    ap.add_argument("--fp32", action="store_true", help="no bf16 autocast")
    ap.add_argument("--chunk", type=int, default=32,
                    help="linear attention in blocks of this many positions (0: the plain masked "
                         "form; same function, about 1.8x slower on a CPU)")
    ap.add_argument("--seed", type=int, default=0)


def average_args(ap):
    """The weights' moving average."""
    ap.add_argument("--ema", type=float, default=0.0, metavar="DECAY",
                    help="also keep an exponential moving average of the weights (e.g. 0.995), "
                         "saved as the checkpoint's 'ema_state' and evaluated at each eval")
    ap.add_argument("--ema-from-decay", action="store_true",
                    help="--ema: the average starts again from the weights where the rate's decay "
                         "begins (--decay-start, --time-decay), so it holds decayed weights only "
                         "(an average reaching back to a high rate's weights reads worse than the "
                         "last ones: models/mnist/MODEL_CARD.md)")
    ap.add_argument("--use-ema", action="store_true",
                    help="--eval-only: evaluate the checkpoint's averaged weights")


def start_args(ap):
    """Where the weights come from: an exported folder, an evaluation only, an old pickle."""
    ap.add_argument("--init-from", metavar="MODEL_DIR",
                    help="start from an exported model folder's weights when --ckpt does not "
                         "exist yet (e.g. continue training models/mnist on another machine)")
    ap.add_argument("--eval-only", action="store_true",
                    help="print fp32 held-out bits/dim of the checkpoint over every image and exit")
    ap.add_argument("--trust-pickle", action="store_true",
                    help="load a checkpoint that is a full pickle (one written before 2026-11-22): "
                         "it can run code, so only a file you made or trust")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    for add in (files_args, rate_args, compile_args, schedule_args, run_args, average_args,
                start_args):
        add(ap)
    return ap.parse_args()


# The arguments before numpy and torch: --help and a usage error need neither (any Python).
ARGS = parse_args() if __name__ == "__main__" else None

import numpy as np  # noqa: E402
import torch  # noqa: E402

import tarnn_model as tm  # noqa: E402
from mnist_data import IdxError, read_idx  # noqa: E402


def load_images(path, cfg):
    try:
        a = read_idx(path)
    except IdxError as e:
        sys.exit(f"train: {e}")
    t = cfg["height"] * cfg["width"] * cfg["channels"]
    if a.ndim < 2 or int(np.prod(a.shape[1:])) != t:
        sys.exit(f"train: {path}: images of shape {a.shape[1:]}, the model wants "
                 f"{cfg['height']}x{cfg['width']}x{cfg['channels']}")
    return torch.from_numpy(a.reshape(a.shape[0], t).astype(np.int64))


def autocast(device, enabled):
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


@torch.no_grad()
def evaluate(model, images, device, batch, use_bf16):
    model.eval()
    total = []
    for i in range(0, len(images), batch):
        with autocast(device, use_bf16):
            total.append(tm.bits_per_dim(model, images[i:i + batch].to(device)).float().cpu())
    model.train()
    return torch.cat(total).mean().item()


class CompileTimeout(BaseException):
    """The watchdog's alarm. A BaseException, as KeyboardInterrupt is, so that no `except
    Exception` inside torch's compiler takes it for a compile error of its own."""


@contextlib.contextmanager
def deadline(seconds):
    """Raises CompileTimeout in the main thread once `seconds` have passed (SIGALRM): a compile
    that runs long is interrupted at its next Python instruction, or when its wait for a compile
    worker returns to Python."""
    def on_alarm(_signum, _frame):
        raise CompileTimeout()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


class StandInCompile(torch.nn.Module):
    """TARNN_TRAIN_COMPILE=fail|hang: torch.compile's place taken by a module whose first call
    raises as a failed compile does, or never returns (the watchdog's test, here on a CPU)."""

    def __init__(self, model, how):
        super().__init__()
        self.model, self.how, self.cfg = model, how, model.cfg

    def forward(self, x):
        if self.how == "hang":
            while True:
                time.sleep(0.05)
        raise RuntimeError("compilation failed (TARNN_TRAIN_COMPILE=fail, a stand-in)")


def compiled(model):
    """torch.compile(model) (compiled lazily, at its first steps), or the model itself when this
    torch has no torch.compile or it refuses at once, said on stdout."""
    how = os.environ.get("TARNN_TRAIN_COMPILE")
    if how:
        if how not in ("fail", "hang"):
            sys.exit(f"train: TARNN_TRAIN_COMPILE={how}: fail or hang")
        return StandInCompile(model, how)
    if not hasattr(torch, "compile"):
        print(f"--compile: torch {torch.__version__} has no torch.compile: running without",
              flush=True)
        return model
    try:
        return torch.compile(model)
    except Exception as e:  # torch raises many kinds; each means eager mode here
        print(f"--compile: torch.compile refused the model ({one_line(e)}): eager mode", flush=True)
        return model


def one_line(e):
    lines = [ln for ln in str(e).splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[0][:160] if lines else ''}"


class CompileGuard:
    """The compiled model's first WATCHED steps under a watchdog: they may take `limit` seconds in
    all (compiling happens there: the forward at the first call, the backward at the first
    backward). A step that raises, or outlasts what is left of the limit, is done again in eager
    mode, and the model stays eager: no minutes of a lease are lost to a compiler. `fn(forward)`
    holds only what can be done again (zeroed gradients, forward, backward): the optimizer steps
    after it returns, so a step done twice updates the weights once."""

    WATCHED = 3

    def __init__(self, forward, model, limit):
        self.forward, self.model, self.left, self.steps, self.spent = forward, model, limit, 0, 0.0
        self.limit = limit

    def watching(self):
        return self.forward is not self.model and self.steps < self.WATCHED

    def run(self, fn, step):
        if not self.watching():
            return fn(self.forward)
        t = time.time()
        try:
            with deadline(self.left):
                out = fn(self.forward)
        except CompileTimeout:
            why = f"the first steps took over {self.limit:g} s (--compile-timeout)"
        except Exception as e:  # a compiler error, whatever torch calls it
            why = f"compiling failed: {one_line(e)}"
        else:
            self.spent += time.time() - t
            self.left -= time.time() - t
            self.steps += 1
            if not self.watching():
                print(f"--compile: compiled; the first {self.steps} steps took {self.spent:.1f} s",
                      flush=True)
            return out
        print(f"--compile: {why}: eager mode from step {step}", flush=True)
        self.forward = self.model
        if hasattr(torch, "_dynamo"):
            torch._dynamo.reset()  # what the dropped compile holds
        return fn(self.model)


class RateWindow:
    """Images/s over the first `seconds` of training once the compiled steps are done, with
    evals and checkpoints left out; the GPU synchronised at both ends. Printed, and written as
    JSON to `path` (tools/gpu/lease.sh waits for it before anything else uses the GPU)."""

    def __init__(self, seconds, path, device, batch):
        self.seconds, self.path, self.device, self.batch = seconds, path, device, batch
        self.t0, self.images0, self.step0, self.paused, self.done = None, 0, 0, 0.0, seconds <= 0

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    @contextlib.contextmanager
    def pause(self, active):
        """Time spent inside is left out of the window (the GPU's queue drained first)."""
        running = active and self.t0 is not None and not self.done
        if running:
            self.sync()
        t = time.time()
        yield
        if running:
            self.paused += time.time() - t

    def update(self, step, seen, compiled, final=False):
        if self.done:
            return
        if self.t0 is None:
            if not final:
                self.sync()
                self.t0, self.images0, self.step0 = time.time(), seen, step
            return
        if not final and time.time() - self.t0 - self.paused < self.seconds:
            return
        self.sync()
        took = time.time() - self.t0 - self.paused
        rate = (seen - self.images0) / took if took > 0 else 0.0
        whole = took >= self.seconds
        note = "" if whole else f" (training ended first: {took:.1f} of {self.seconds:g} s)"
        print(f"rate: {rate:.1f} images/s over {took:.1f} s, steps {self.step0}-{step}, batch "
              f"{self.batch}, {'compiled' if compiled else 'eager'}{note}", flush=True)
        if self.path:
            rec = {"images_per_second": rate, "seconds": took, "complete": whole,
                   "steps": [self.step0, step], "batch": self.batch, "compiled": compiled,
                   "device": (torch.cuda.get_device_name() if self.device.type == "cuda"
                              else "cpu"), "torch": torch.__version__}
            tmp = self.path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(rec, f)
                f.write("\n")
            os.replace(tmp, self.path)
        self.done = True


def learning_rate(args, step, ease=None, elapsed=0.0):
    """Linear warm-up, constant, then an optional cosine decay: a function of the step, so a
    resumed run continues the same schedule. ease = (first_step, last_lr): a resumed run whose
    rate differs from the one its checkpoint last used moves there linearly over --warmup steps
    (a sudden 3x, 1e-4 to 3e-4 at step 2443, sent the train loss from 1.49 to 1.86 here)."""
    lr = args.lr * min(1.0, (step + 1) / args.warmup)
    if args.decay_steps > 0 and step >= args.decay_start:
        f = min(1.0, (step - args.decay_start) / args.decay_steps)
        lr = args.lr_final + (lr - args.lr_final) * 0.5 * (1.0 + math.cos(math.pi * f))
    if args.time_decay > 0 and args.minutes and elapsed > 1.0 - args.time_decay:
        # a time-boxed run (a GPU lease) cannot know its step count ahead: decay over its clock
        f = min(1.0, (elapsed - (1.0 - args.time_decay)) / args.time_decay)
        lr = args.lr_final + (lr - args.lr_final) * 0.5 * (1.0 + math.cos(math.pi * f))
    if ease:
        first, last = ease
        lr = last + (lr - last) * min(1.0, (step - first + 1) / args.warmup)
    return lr


def decaying(args, step, elapsed):
    """Whether learning_rate's decay (by steps, or over the clock's last fraction) has begun."""
    return ((args.decay_steps > 0 and step >= args.decay_start)
            or bool(args.time_decay > 0 and args.minutes and elapsed > 1.0 - args.time_decay))


@torch.no_grad()
def update_average(ema, model, decay, restart):
    """e = decay e + (1 - decay) w for every tensor at once (one fused update: a GPU would
    otherwise launch many small kernels), or e = w where the average starts again."""
    es, ps = list(ema.parameters()), [p.detach() for p in model.parameters()]
    if restart:
        for e, p in zip(es, ps):
            e.copy_(p)
    else:
        torch._foreach_mul_(es, decay)
        torch._foreach_add_(es, ps, alpha=1.0 - decay)


def resumable(args):
    """The checkpoint at --ckpt with its JSON's floats back in place, or None where there is none."""
    if not os.path.exists(args.ckpt):
        return None
    try:
        state = tm.load_pt(args.ckpt, args.trust_pickle)
    except (OSError, PermissionError) as e:
        sys.exit(f"train: {e}")
    if "meta" in state:  # floats live in JSON, so the file loads weights-only
        meta = json.loads(state["meta"])
        state.update(history=meta["history"], ema_decay=meta.get("ema_decay"),
                     ema_since=meta.get("ema_since", 0),
                     optimizer={"state": state["optimizer_state"],
                                "param_groups": meta["optimizer_groups"]})
    return state


def starting_model(args, state):
    """The weights a run starts from, and their config: the checkpoint's, an exported folder's
    (--init-from), or new ones of the flags' sizes."""
    if state:
        cfg = state["config"]
        model = tm.ImageTransformer(cfg)
        model.load_state_dict(state["model_state"])
    elif args.init_from:
        model = tm.load_model_dir(args.init_from)
        cfg = model.cfg
        print(f"initialised from {args.init_from}", flush=True)
    else:
        cfg = {k: getattr(args, k) for k in tm.MNIST_CONFIG}
        model = tm.ImageTransformer(cfg)
    return model, cfg


def eval_only(args, state, model, cfg, device):
    """--eval-only: the checkpoint's (or with --use-ema its average's) fp32 held-out bits/dim."""
    if not state or not args.heldout:
        sys.exit("train: --eval-only needs an existing --ckpt and --heldout")
    if args.use_ema:
        if "ema_state" not in state:
            sys.exit("train: --use-ema: the checkpoint has no averaged weights")
        model.load_state_dict(state["ema_state"])
    images = load_images(args.heldout, cfg)
    print(f"heldout bits/dim {evaluate(model, images, device, args.batch, False):.6f} "
          f"(fp32, {len(images)} images, step {state['step']})")


def check_run(args, state):
    """A training run's files given; --ref-batch's rate and warm-up; a fresh optimizer said."""
    if not args.train or not args.heldout:
        sys.exit("train: --train and --heldout are required")
    if args.ref_batch > 0: # the same rate per image seen, the same warm-up in images
        args.lr *= math.sqrt(args.batch / args.ref_batch)
        args.warmup = max(1, round(args.warmup * args.ref_batch / args.batch))
        print(f"batch {args.batch} against {args.ref_batch}: lr {args.lr:.3g}, warm-up "
              f"{args.warmup} steps", flush=True)
    if not state:  # a new run, or one from an exported folder (--init-from): no moments to resume
        print(f"fresh optimizer (AdamW, no moments): the rate warms up linearly from 0 to "
              f"{args.lr:.3g} over {args.warmup} steps ({args.warmup * args.batch} images)",
              flush=True)


class Training:
    """A training run: the model, its optimizer, its average, the data's order and the clock,
    stepped until --max-steps, --minutes or a signal, checkpointed every --ckpt-minutes and at the
    end. Each step of the set-up below in the order it ran when this was one function: the
    average's model is made after the optimizer (the same random numbers drawn), and the
    compile's message comes after the signals are caught."""

    def __init__(self, args, state, model, cfg, device):
        self.args, self.state, self.model, self.cfg, self.device = args, state, model, cfg, device
        self.load_data()
        self.make_optimizer()
        self.resume()
        self.make_average()
        self.stop = False
        signal.signal(signal.SIGINT, self.on_signal)
        signal.signal(signal.SIGTERM, self.on_signal)
        os.makedirs(os.path.dirname(os.path.abspath(args.ckpt)), exist_ok=True)
        self.use_bf16 = not args.fp32
        self.guard = CompileGuard(compiled(model) if args.compile else model, model,
                                  args.compile_timeout)
        self.measured = RateWindow(args.rate_seconds, args.rate_file, device, args.batch)
        self.start_epoch()
        self.start_clock()

    def load_data(self):
        # the training images on the device once, as bytes (55,000 MNIST digits: 43 MB)
        self.train = load_images(self.args.train, self.cfg).to(torch.uint8).to(self.device)
        heldout = load_images(self.args.heldout, self.cfg)
        # evenly spaced, so every digit counts (the held-out file is sorted by label)
        n = min(self.args.eval_images, len(heldout))
        self.heldout = heldout[torch.linspace(0, len(heldout) - 1, n).long()]

    def make_optimizer(self):
        # The head's outputs (mixture means and log scales) must travel far, to -7 and +-1: Adam
        # moves each parameter about lr per step, so the head may take a larger rate. (A larger
        # rate for the byte-value table, whose N(0, 1) rows stay unrelated at 1e-4, made no
        # difference over 120 steps at 30x: its gradients are small and point nowhere in
        # particular yet.)
        named = list(self.model.named_parameters())
        head = [p for n, p in named if n.startswith("predictor.")]
        body = [p for n, p in named if not n.startswith("predictor.")]
        self.mults = (1.0, self.args.head_lr_mult)
        groups = [{"params": ps, "lr_mult": m} for ps, m in zip((body, head), self.mults)]
        lr = self.args.lr
        try:  # one fused kernel for every parameter on a GPU (torch 2.x), else the loop over them
            self.opt = torch.optim.AdamW(groups, lr=lr, weight_decay=0.0,
                                         fused=self.device.type == "cuda")
        except (TypeError, RuntimeError):
            self.opt = torch.optim.AdamW(groups, lr=lr, weight_decay=0.0)

    def resume(self):
        """Where the checkpoint stopped: the optimizer's moments, the step, the images seen and
        the history; a rate that the flags changed is eased into. The flags' multipliers win
        over the checkpoint's."""
        args, state, opt = self.args, self.state, self.opt
        self.step, self.seen, self.history, self.ease = 0, 0, [], None
        if state:
            saved = state["optimizer"]
            if len(saved["param_groups"]) != len(opt.param_groups):  # grouped otherwise: re-split
                # (the groups follow named_parameters order, so the concatenated ids line up)
                ids = [i for g in saved["param_groups"] for i in g["params"]]
                sizes = [len(g["params"]) for g in opt.param_groups]
                g0, cut = saved["param_groups"][0], np.cumsum([0] + sizes)
                saved["param_groups"] = [dict(g0, params=ids[a:b])
                                         for a, b in zip(cut[:-1], cut[1:])]
            opt.load_state_dict(saved)
            self.step, self.seen = state["step"], state["images_seen"]
            self.history = state["history"]
            step = self.step
            print(f"resumed {args.ckpt} at step {step}, {self.seen} images seen", flush=True)
            last = saved["param_groups"][0]["lr"]  # the body's rate at the checkpoint's last step
            if step and abs(learning_rate(args, step - 1) - last) > 0.01 * last:  # flags changed
                self.ease = (step, last)
                print(f"easing the learning rate from {last:.3g} to "
                      f"{learning_rate(args, step):.3g} over {args.warmup} steps", flush=True)
        for group, mult in zip(opt.param_groups, self.mults):
            group["lr_mult"] = mult  # the flags win over a resumed checkpoint's values

    def make_average(self):
        # Polyak averaging: with batch 16 the weights wander; their average evaluates better.
        state = self.state
        self.ema = None
        self.ema_since = (state or {}).get("ema_since", 0)  # the step the average began at
        if self.args.ema > 0:
            self.ema = tm.ImageTransformer(self.cfg).to(self.device).eval()
            self.ema.load_state_dict(state["ema_state"] if state and "ema_state" in state
                                     else self.model.state_dict())
            for p in self.ema.parameters():
                p.requires_grad_(False)

    def on_signal(self, signum, _frame):
        print(f"signal {signum}: checkpointing and stopping", flush=True)
        self.stop = True

    def start_epoch(self):
        """The data's RNG and place in its epoch: the checkpoint's, so that a resumed run sees
        the images it would have seen had it not stopped, or a fresh epoch's order."""
        state = self.state
        self.gen = torch.Generator().manual_seed(self.args.seed + self.step)
        if state and "data_rng" in state and len(state["order"]) == len(self.train):
            self.gen.set_state(state["data_rng"])
            self.order, self.pos = state["order"].to(self.device), int(state["pos"])
        else:  # a new run, an older checkpoint or other training data: a fresh epoch
            self.order, self.pos = self.new_order(), 0

    def new_order(self):
        return torch.randperm(len(self.train), generator=self.gen).to(self.device)  # an epoch's

    def start_clock(self):
        args = self.args
        self.started = self.last_save = self.t0 = time.time()
        if args.end_at:  # the lease's deadline: the decay over --minutes ends at it
            args.minutes = max((args.end_at - self.started) / 60, 1e-3)
            print(f"training for {args.minutes:.2f} minutes, to {time.ctime(args.end_at)}"
                  + (f", the rate decaying over the last {args.minutes * args.time_decay:.2f}"
                     if args.time_decay > 0 else ""), flush=True)

    def save(self):
        # Tensors, ints and strings only, the floats in a JSON string: torch's weights-only loader
        # reads it, so resuming or exporting never runs a pickle's code.
        args, ema = self.args, self.ema
        tmp = args.ckpt + ".tmp"
        saved = self.opt.state_dict()
        meta = {"optimizer_groups": saved["param_groups"], "history": self.history,
                "ema_decay": args.ema if ema else None, "ema_since": self.ema_since,
                "train_file": args.train,
                "args": vars(args)}
        torch.save({"format": "tarnn-checkpoint-2", "model_state": self.model.state_dict(),
                    "optimizer_state": saved["state"],
                    **({"ema_state": ema.state_dict()} if ema else {}),
                    "config": self.cfg, "step": self.step, "images_seen": self.seen,
                    "meta": json.dumps(meta),
                    # the data's RNG and place in its epoch: a resumed run sees the images it
                    # would have seen had it not stopped
                    "data_rng": self.gen.get_state(), "order": self.order.cpu(), "pos": self.pos},
                   tmp)
        os.replace(tmp, args.ckpt)

    def heldout_eval(self, step, seen, note=""):
        args, device = self.args, self.device
        bpd = evaluate(self.model, self.heldout, device, args.batch, self.use_bf16)
        entry = {"step": step, "images_seen": seen, "heldout_bpd": bpd}
        line = f"step {step} heldout bits/dim {bpd:.4f}"
        if self.ema is not None and step:
            entry["heldout_bpd_ema"] = evaluate(self.ema, self.heldout, device, args.batch,
                                                self.use_bf16)
            line += f", averaged weights {entry['heldout_bpd_ema']:.4f}"
        self.history.append(entry)
        print(f"{line} ({len(self.heldout)} images{note})", flush=True)

    def run(self):
        args = self.args
        if self.step == 0:  # where a run starts from (models/mnist for a lease): what it must beat
            self.heldout_eval(0, 0, ", the start")
        # the train loss summed on the device: no sync a step
        self.window, self.window_steps = torch.zeros((), device=self.device), 0
        while not self.stop and (not args.max_steps or self.step < args.max_steps):
            if args.minutes and time.time() - self.started > args.minutes * 60:
                print(f"{args.minutes:g} minutes: checkpointing and stopping", flush=True)
                break
            self.report(self.train_step())
            self.eval_and_save()
        self.finish()

    def forward_backward(self, forward, batch):  # all of a step that the guard may do twice
        self.opt.zero_grad(set_to_none=True)
        with autocast(self.device, self.use_bf16):
            loss = tm.bits_per_dim(forward, batch).mean()
        loss.backward()
        return loss

    def train_step(self):
        """One step: the epoch's next batch, the scheduled rate, the forward and backward (under
        the compile guard), the clipped update and the average's; returns the loss."""
        args = self.args
        if self.pos + args.batch > len(self.order):
            self.order, self.pos = self.new_order(), 0
        batch = self.train[self.order[self.pos:self.pos + args.batch]].long()
        self.pos += args.batch
        elapsed = (time.time() - self.started) / (args.minutes * 60) if args.minutes else 0.0
        for group in self.opt.param_groups:
            group["lr"] = learning_rate(args, self.step, self.ease, elapsed) * group["lr_mult"]
        loss = self.guard.run(lambda forward: self.forward_backward(forward, batch), self.step)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), args.clip)
        self.opt.step()
        if self.ema is not None:
            self.update_average(elapsed)
        self.step += 1
        self.seen += len(batch)
        if not self.guard.watching():
            self.measured.update(self.step, self.seen, self.guard.forward is not self.model)
        return loss

    def update_average(self, elapsed):
        args, step = self.args, self.step
        restart = args.ema_from_decay and not self.ema_since and decaying(args, step, elapsed)
        update_average(self.ema, self.model, args.ema, restart)
        if restart:
            self.ema_since = step + 1
            print(f"step {step + 1}: the rate's decay has begun: the average starts again "
                  f"from these weights (--ema-from-decay)", flush=True)

    def report(self, loss):
        """Every 20 steps the mean train loss, the rate and the learning rate."""
        self.window += loss.detach()
        self.window_steps += 1
        if self.step % 20 == 0:  # the one host sync of 20 steps
            mean = (self.window / self.window_steps).item()
            rate = 20 * self.args.batch / (time.time() - self.t0)
            print(f"step {self.step} images {self.seen} train bits/dim {mean:.4f} "
                  f"({rate:.1f} images/s, lr {self.opt.param_groups[0]['lr']:.3g})", flush=True)
            self.t0, self.window = time.time(), torch.zeros((), device=self.device)
            self.window_steps = 0

    def eval_and_save(self):
        eval_due = self.step % self.args.eval_every == 0
        save_due = time.time() - self.last_save > self.args.ckpt_minutes * 60
        with self.measured.pause(eval_due or save_due):  # evals and checkpoints are not training
            if eval_due:
                self.heldout_eval(self.step, self.seen)
            if save_due:
                self.save()
                self.last_save = time.time()

    def finish(self):
        step, seen = self.step, self.seen
        self.measured.update(step, seen, self.guard.forward is not self.model, final=True)
        if step and (not self.history or self.history[-1]["step"] != step):
            self.heldout_eval(step, seen)  # the weights as they are saved, beside the start's
        say_which(self.history)
        self.save()
        print(f"saved {self.args.ckpt} at step {step}, {seen} images seen", flush=True)


def main(args):
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tm.Attention.chunk = args.chunk
    torch.manual_seed(args.seed)
    state = resumable(args)
    model, cfg = starting_model(args, state)
    model = model.to(device)
    if args.eval_only:
        eval_only(args, state, model, cfg, device)
        return
    check_run(args, state)
    Training(args, state, model, cfg, device).run()

def say_which(history):
    """The end's held-out figures beside the start's (the first eval of this checkpoint's run), and
    which weights to keep: `keep: averaged` or `keep: last` (tools/gpu/lease.sh exports those)."""
    if not history or not history[-1]["step"]:
        return
    first, end = history[0], history[-1]
    last, avg = end["heldout_bpd"], end.get("heldout_bpd_ema")
    keep = "averaged" if avg is not None and avg <= last else "last"
    best = avg if keep == "averaged" else last
    start = (f"the start (step {first['step']}) {first['heldout_bpd']:.4f}, "
             if first["step"] < end["step"] else "")
    verdict = ""
    if start:
        verdict = "; better than the start" if best < first["heldout_bpd"] else (
            "; NOT better than the start")
    print(f"end: held-out bits/dim {start}the last weights {last:.4f}"
          + (f", the averaged {avg:.4f}" if avg is not None else "")
          + f" (step {end['step']}): keep: {keep}{verdict}", flush=True)


if __name__ == "__main__":
    main(ARGS)
