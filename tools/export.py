#!/usr/bin/python3
"""Export a PyTorch checkpoint to a tarnn model folder (config.json + model.safetensors).

    tools/export.py checkpoints/mnist.pt --out models/mnist --data data/mnist/valid-images-idx3-ubyte
    tools/export.py paper_mnist.pth --out models/paper --config mnist     # the paper's files
    tools/export.py performer.pth --out models/perf --config mnist --feature-map favor
    tools/export.py performer.pth --out models/perf --config mnist \\
        --feature-map '{"kind": "favor", "n_dims": 64, "softmax_temp": 0.17}'

Accepts
  - train.py's checkpoints: {"model_state": state_dict, "config": {...}, ...};
  - the paper's main.py checkpoints: {"model_state": state_dict, ...} (no config: give --config
    and the size flags);
  - bare state dicts, as the paper's colab saves them (value_embedding.weight,
    pos_embedding.pe [1, L, d_model/2], transformer.layers.*, transformer.norm.*, predictor.*).
Every key and shape is checked against the config; a missing, extra or misshapen tensor, a
non-finite value, a config key, attention or activation the engine does not know is an error that
names it, and nothing is written.

Attention and feature map (docs/SPEC.md section 1). A checkpoint's config (train.py's, or a
--config FILE) that records "attention" is used as is ("feature_map" absent: elu+1, the format's
rule), and --attention or --feature-map that contradict it are an error. A checkpoint without one
(the paper's files, --config mnist) cannot say how it was trained: an elementwise map such as relu
stores no tensor. Give
  --attention linear|softmax     (fast-transformers' names causal-linear and full are taken too)
  --feature-map KIND             elu+1, relu, random_fourier, smoothed_random_fourier, favor,
                                 generalized_random: n_dims from the stored omega's shape (which
                                 fixes it but for smoothed_random_fourier's n_dims 2c+1 or 2c+2,
                                 refused naming both; random_fourier's and favor's 2c and 2c + 1
                                 give the same attention, 2c is taken), the other parameters the
                                 library's defaults
  --feature-map JSON             the same object as config.json's feature_map, with parameters:
                                 '{"kind": "favor", "n_dims": 64, "softmax_temp": 0.17}'
else the paper's defaults are assumed (linear attention, elu+1), and a line on stderr says so.
A random-feature map's omega is read per layer under fast-transformers' own buffer name,
transformer.layers.{i}.attention.inner_attention.feature_map.omega [d_head, columns] (train.py's
checkpoints hold it under the same name); a random-feature model without it, or an omega in a
model whose map has none, is an error naming the tensor. Attentions of fast-transformers with no
recurrent form (reformer, clustered, improved-clustered, exact-topk, local, ...) are refused with
the reason.

Verification: --verify N scores N images with the PyTorch reference (tarnn_model.py in float64,
the checkpoint's weights rounded to --dtype as the engine reads them) and with the engine
(`tarnn score` of the exported folder), and refuses the export if any image's bits/dim differ by
more than 1e-4, or if the engine cannot run the model (it then says why). It is on by default,
with 16 images, when --data (an IDX, .npy or PNG file of the model's image size) is given;
without --data, --verify N scores N synthetic images (random bytes, black, strokes). The folder is
written beside --out under a temporary name and renamed to --out only once it is verified, so a
refused export leaves no --out behind (an existing --out is left as it was).

A .pt/.pth checkpoint is a Python pickle, and a pickle can run code its author put in it. This
tool reads with torch's weights-only loader, which runs none: train.py's checkpoints load so.
Files it refuses (the paper's, whose optimizer state holds floats that torch 1.13's weights-only
loader rejects; train.py's before 2026-11-22; TorchScript archives and torch's legacy tar format,
which torch would not leave to that loader) need --trust-pickle: give it only for files you trust. The engine itself never reads pickles: model.safetensors is plain data.
"""

import argparse
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_config import MNIST_CONFIG  # noqa: E402  (plain data: the flags, without torch)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--out", required=True, help="model folder to write")
    ap.add_argument("--config", help="mnist, or a config.json, for checkpoints without one")
    for key, val in MNIST_CONFIG.items():
        if key != "attention":
            ap.add_argument("--" + key.replace("_", "-"), type=type(val), default=None,
                            help=f"override {key} of --config")
    ap.add_argument("--attention", metavar="linear|softmax",
                    help="the model's attention, for a checkpoint whose config does not say "
                         "(default: linear, said on stderr)")
    ap.add_argument("--feature-map", metavar="KIND|JSON",
                    help="linear attention's feature map, for a checkpoint whose config does not "
                         "say: a kind (elu+1, relu, random_fourier, smoothed_random_fourier, "
                         "favor, generalized_random) or config.json's object with parameters, "
                         "'{\"kind\": \"favor\", \"n_dims\": 64}' (default: elu+1, said on "
                         "stderr)")
    ap.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"])
    ap.add_argument("--ema", action="store_true",
                    help="export train.py's averaged weights (its --ema) instead of the last ones")
    ap.add_argument("--trust-pickle", action="store_true",
                    help="load a checkpoint that is a full pickle (the paper's, or train.py's "
                         "before 2026-11-22): it can run code, so only a file you trust")
    ap.add_argument("--data", help="IDX, .npy or PNG images of the model's size for --verify")
    ap.add_argument("--verify", type=int, metavar="N",
                    help="score N images with the engine and PyTorch and refuse the export if "
                         "any differs by more than 1e-4 bits/dim (default: 16 with --data, else "
                         "0; without --data, synthetic images)")
    ap.add_argument("--tarnn", help="the engine for --verify (default: build/tarnn beside this "
                                    "checkout, else tarnn on PATH)")
    return ap.parse_args()


# The arguments before numpy and torch: --help and a usage error need neither (any Python).
ARGS = parse_args() if __name__ == "__main__" else None

import numpy as np  # noqa: E402
import torch  # noqa: E402

import tarnn_model as tm  # noqa: E402
from mnist_data import IdxError, read_idx, write_idx  # noqa: E402

# fast-transformers' attention names: the two the engine runs under the library's own name, and
# those it refuses with the reason (the builders' attention_type, fast_transformers/attention/).
ATTENTION_ALIASES = {"causal-linear": "linear", "full": "softmax"}
NO_RECURRENT_FORM = {
    "reformer": "its keys are its normalised queries (it uses no key projection) and it attends "
                "within hash buckets, so these weights run as neither linear nor softmax attention",
    "clustered": "it groups the queries of the whole sequence into clusters and attends per "
                 "cluster, so a position's output depends on later positions",
    "improved-clustered": "it groups the queries of the whole sequence into clusters and attends "
                          "per cluster, so a position's output depends on later positions",
    "causal-improved-clustered": "it groups the queries of the whole sequence into clusters, so "
                                 "a position's output depends on later positions' queries",
    "exact-topk": "it attends to each query's top-k keys only, a selection neither linear nor "
                  "softmax attention makes",
    "local": "it attends to a window of local_context positions around each query, not to the "
             "whole prefix",
    "conditional-full": "it switches between full attention and another by sequence length, so "
                        "its weights are not those of one attention",
    "aft-full": "the Attention Free Transformer's position-biased weighting is neither linear nor "
                "softmax attention",
    "aft-simple": "the Attention Free Transformer's gated weighting is neither linear nor softmax "
                  "attention",
}
TOLERANCE = 1e-4  # bits/dim, per image: what the tests hold the engine to (docs/SPEC.md)


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


def attention_of(name, where):
    """The engine's attention for a name (ours or fast-transformers'); one line refuses the rest."""
    if not isinstance(name, str):
        fail(f"{where}: attention must be a string (got {name!r})")
    name = ATTENTION_ALIASES.get(name, name)
    if name in tm.ATTENTIONS:
        return name
    if name in NO_RECURRENT_FORM:
        fail(f"{where}: attention {name!r} has no recurrent form: {NO_RECURRENT_FORM[name]} "
             f"(tarnn runs linear and softmax attention)")
    known = list(tm.ATTENTIONS) + list(ATTENTION_ALIASES)
    near = difflib.get_close_matches(name, known + list(NO_RECURRENT_FORM), n=1)
    fail(f"{where}: unknown attention {name!r}: tarnn runs linear (fast-transformers' "
         f"causal-linear) and softmax (full)" + (f"; did you mean {near[0]!r}?" if near else ""))


def feature_map_flag(text):
    """--feature-map: a kind, or a JSON object as config.json's feature_map."""
    if text.lstrip().startswith("{"):
        try:
            fm = json.loads(text)
        except ValueError as e:
            fail(f"--feature-map {text}: not valid JSON ({e})")
        return fm
    return {"kind": text}


def infer_n_dims(fm, state, d_head):
    """A random-feature map given by --feature-map without n_dims: n_dims from the stored omega's
    shape [d_head, columns], which the checkpoint determines up to one case. Where two n_dims draw
    that shape: the library's default (d_head) if it is one of them; for random_fourier and favor,
    the even one, twice the columns (the two give phi up to a constant factor, which the
    attention's normaliser cancels but for its 1e-6); smoothed_random_fourier's two differ, and are refused,
    named both. Without an omega, fm as it is (check_omega says what is missing)."""
    kind = fm.get("kind")
    if not isinstance(kind, str) or "n_dims" in fm or "n_dims" not in tm.FEATURE_MAPS.get(
            kind, ("", ()))[1]:
        return fm
    omega = state.get("transformer.layers.0.attention.inner_attention.feature_map.omega")
    if omega is None or omega.dim() != 2 or omega.shape[1] < 1:
        return fm
    cols = int(omega.shape[1])
    fits = [n for n in range(max(cols, 2), 2 * cols + 3)
            if tm.omega_columns({"kind": kind, "n_dims": n}) == cols]
    if len(fits) == 1 or d_head in fits:
        return dict(fm, n_dims=fits[0] if len(fits) == 1 else d_head)
    if kind in ("random_fourier", "favor"):
        return dict(fm, n_dims=2 * cols)
    fail(f"--feature-map {kind}: omega {list(omega.shape)} fits n_dims "
         f"{' and '.join(map(str, fits))}, and the checkpoint does not say which (they weigh the "
         f"cos and sin features against the smoothing one differently): give --feature-map "
         f"'{json.dumps(dict(fm, n_dims=fits[0]))}' or {fits[1]}")


def resolve_attention(cfg, recorded, args, state):
    """The attention and feature map the export writes: the config's where it records them (flags
    must agree), else the flags (a random-feature map's n_dims from its omega: infer_n_dims), else
    the paper's (linear, elu+1), said on stderr. Returns the config and a note for the file's
    metadata when something was assumed."""
    where = args.config or args.checkpoint
    flag_fm = feature_map_flag(args.feature_map) if args.feature_map is not None else None
    if isinstance(flag_fm, dict) and not recorded and "feature_map" not in cfg:
        flag_fm = infer_n_dims(flag_fm, state, cfg.get("d_head"))
    flag_att = attention_of(args.attention, "--attention") if args.attention is not None else None
    if flag_att == "softmax" and flag_fm is not None:
        fail("--feature-map with --attention softmax: a softmax model has no feature map")
    if recorded:
        att = attention_of(cfg["attention"], where)
        cfg["attention"] = att
        if flag_att is not None and flag_att != att:
            fail(f"--attention {args.attention} contradicts {where}, which records {att!r} "
                 f"attention (drop the flag: a recorded config is used as is)")
        if flag_fm is not None:
            if att != "linear":
                fail(f"--feature-map contradicts {where}, which records {att!r} attention "
                     f"(no feature map)")
            have, want = check_fm(cfg, where), check_fm(dict(cfg, feature_map=flag_fm),
                                                        "--feature-map")
            if have != want:
                fail(f"--feature-map {json.dumps(want)} contradicts {where}, which records "
                     f"{json.dumps(have)} (drop the flag: a recorded config is used as is)")
        return cfg, None
    if "feature_map" in cfg and cfg["feature_map"] is not None:  # a map without an attention
        flag_att = flag_att or "linear"
        if flag_fm is not None and check_fm(cfg, where) != check_fm(
                dict(cfg, feature_map=flag_fm), "--feature-map"):
            fail(f"--feature-map contradicts {where}'s feature_map")
        flag_fm = cfg["feature_map"]
    cfg.pop("feature_map", None)
    assumed = None
    if flag_att is None and flag_fm is None:
        assumed = "linear attention with the elu+1 feature map (the paper's)"
        print(f"export: assuming {assumed}; give --attention/--feature-map if the model was "
              f"trained otherwise", file=sys.stderr)
    elif flag_att != "softmax" and flag_fm is None:
        assumed = "the elu+1 feature map (the paper's)"
        print(f"export: assuming {assumed}; give --feature-map if the model was trained "
              f"otherwise", file=sys.stderr)
    cfg["attention"] = flag_att or "linear"
    if cfg["attention"] == "linear":
        cfg["feature_map"] = check_fm(dict(cfg, feature_map=flag_fm or {"kind": "elu+1"}),
                                      "--feature-map")
    return cfg, assumed


def check_fm(cfg, where):
    """feature_map_of, its ValueError as one line."""
    if not isinstance(cfg.get("d_head"), int):
        fail(f"{where}: config lacks 'd_head'")
    try:
        return tm.feature_map_of(cfg)
    except ValueError as e:
        fail(f"{where}: {e}")


def check_omega(state, cfg, assumed):
    """omega, per layer under the library's name, exactly when the feature map draws one."""
    fm = tm.feature_map_of(cfg) if cfg["attention"] == "linear" else None
    cols = tm.omega_columns(fm) if fm else 0
    found = sorted(k for k in state if k.endswith("feature_map.omega"))
    if not cols and found:
        what = (f"{cfg['attention']} attention" if not fm else f"the {fm['kind']} feature map"
                + (", assumed" if assumed else ""))
        kinds = [k for k, (_, params) in tm.FEATURE_MAPS.items() if "n_dims" in params]
        fail(f"the checkpoint holds {found[0]} {list(state[found[0]].shape)}, a random-feature "
             f"map's omega, but the model has {what}, which draws none: give --feature-map KIND, "
             f"the kind it was trained with ({', '.join(kinds[:-1])} or {kinds[-1]}): the "
             f"checkpoint does not say it; n_dims it does, in omega's shape")
    if not cols:
        return
    names = [f"transformer.layers.{i}.attention.inner_attention.feature_map.omega"
             for i in range(cfg["n_layers"])]
    missing = [k for k in names if k not in state]
    if missing:
        fail(f"the {fm['kind']} feature map draws an omega [d_head, {cols}] per layer, and the "
             f"checkpoint lacks {missing[0]}" + (f" (missing in {len(missing)} of {len(names)} "
                                                 f"layers)" if len(missing) > 1 else ""))
    want = [cfg["d_head"], cols]
    for k in names:
        if list(state[k].shape) != want:
            fail(f"tensor {k} has shape {list(state[k].shape)}; the {fm['kind']} feature map "
                 f"with n_dims {fm['n_dims']} wants {want}: give the n_dims it was trained with")


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


# ---- --verify ------------------------------------------------------------------------------

def find_tarnn(path):
    """--tarnn, else the build next to this checkout (build/tarnn), else tarnn on PATH."""
    if path:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            fail(f"--tarnn {path}: not an executable file")
        return path
    built = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         "build", "tarnn")
    if os.path.isfile(built) and os.access(built, os.X_OK):
        return built
    found = shutil.which("tarnn")
    if found:
        return found
    fail("--verify needs the engine: no build/tarnn beside this checkout and no tarnn on PATH; "
         "give --tarnn PATH (or --verify 0 to export unverified)")


def read_data(path, cfg):
    """Images of an IDX, .npy or PNG file as bytes [n, T], checked against the model's size."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as e:
        fail(f"--data {path}: {e.strerror}")
    h, w, c = cfg["height"], cfg["width"], cfg["channels"]
    if head == b"\x89PNG\r\n\x1a\n":
        from PIL import Image
        try:
            im = Image.open(path)
            im.load()
        except Exception as e:  # PIL raises many kinds for a broken file
            fail(f"--data {path}: cannot read the PNG: {e}")
        # as the engine reads a PNG: its own channels when they are the model's, else its colour
        # without alpha (gray for RGB, or RGB for gray, is an error there too)
        mode = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[c]
        if im.mode not in ("1", "L", "LA", "RGB", "RGBA", "P"):
            fail(f"--data {path}: a PNG of mode {im.mode}: give 8-bit gray or colour images")
        if im.mode in ("1", "P"):  # expanded, as stb_image does: 1-bit to 0/255, a palette to RGB(A)
            im = im.convert("L" if im.mode == "1" else
                            "RGBA" if "transparency" in im.info else "RGB")
        if im.mode != mode and mode in ("L", "RGB") and im.mode == mode + "A":
            im = im.convert(mode)
        if im.mode != mode:
            fail(f"--data {path}: a PNG of mode {im.mode}, the model wants {c} channel(s)")
        a = np.asarray(im, dtype=np.uint8)[None]
    elif head[:6] == b"\x93NUMPY":
        try:
            a = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            fail(f"--data {path}: cannot read the .npy: {e}")
        if a.dtype != np.uint8:
            fail(f"--data {path}: a .npy of {a.dtype}, not uint8 image bytes")
    else:
        try:
            a = read_idx(path)
        except IdxError as e:
            fail(f"--data {e}")
    if a.ndim == 3:
        a = a[..., None]
    if a.ndim != 4 or a.shape[1:] != (h, w, c):
        fail(f"--data {path}: images of shape {list(a.shape[1:])}, the model wants "
             f"{h}x{w}x{c} (images are not resized)")
    if len(a) == 0:
        fail(f"--data {path}: holds no images")
    return a.reshape(len(a), h * w * c)


def reference_model(model, dtype):
    """The model in float64 with its weights as the engine reads them from a file of `dtype`."""
    rounding = {"F32": lambda t: t.float(), "F16": lambda t: t.half().float(),
                "BF16": lambda t: tm.round_bf16(t.float())}[dtype]
    ref = tm.ImageTransformer(model.cfg)
    ref.load_state_dict({k: rounding(v) for k, v in model.state_dict().items()}, strict=True)
    return ref.double().eval()


def verify(model, folder, shown, images, tarnn, dtype, scratch):
    """Scores `images` with the engine (tarnn score of `folder`) and the PyTorch reference; fails
    unless every image agrees to TOLERANCE. `shown` is the folder's name in messages."""
    cfg = model.cfg
    idx = os.path.join(scratch, "verify-idx-ubyte")
    shape = (len(images), cfg["height"], cfg["width"]) + (
        (cfg["channels"],) if cfg["channels"] > 1 else ())
    write_idx(idx, images.reshape(shape))
    cmd = [tarnn, "score", "--model", folder, "--images", idx, "--json", "--quiet",
           "--device", "cpu"]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        fail(f"--verify: cannot run {tarnn}: {e.strerror}")
    if run.returncode != 0:
        lines = [ln for ln in run.stderr.replace(folder, shown).splitlines() if ln.strip()]
        why = lines[-1] if lines else f"exit status {run.returncode}"
        fail(f"--verify: the engine cannot run the exported model, so it is not written: {why} "
             f"(--verify 0 exports it unverified)")
    try:
        engine = np.array(json.loads(run.stdout)["per_image"], dtype=np.float64)
    except (ValueError, KeyError, TypeError) as e:
        fail(f"--verify: {tarnn} score printed no per-image bits/dim ({e})")
    if engine.shape != (len(images),):
        fail(f"--verify: the engine scored {engine.size} images of {len(images)}")
    ref = reference_model(model, dtype)
    x = torch.from_numpy(images.astype(np.int64))
    with torch.no_grad():
        torch_bpd = torch.cat([tm.bits_per_dim(ref, x[i:i + 16]) for i in range(0, len(x), 16)])
    diff = np.abs(engine - torch_bpd.numpy())
    worst = int(np.argmax(np.where(np.isnan(diff), np.inf, diff)))
    if not np.all(diff <= TOLERANCE):
        fail(f"--verify: image {worst}'s bits/dim is {engine[worst]:.6f} in the engine and "
             f"{float(torch_bpd[worst]):.6f} in PyTorch (float64), {diff[worst]:.2e} apart, over "
             f"{TOLERANCE:g}: the export is refused and nothing is written")
    return float(diff.max()), float(engine.mean())


# ---- writing -------------------------------------------------------------------------------

def install(staged, out):
    """Moves the verified folder into place: a rename where --out is new; into an existing one,
    its two files, each replaced whole (what else it holds, a model card, stays)."""
    if not os.path.exists(out):
        os.rename(staged, out)
        return
    for name in ("model.safetensors", "config.json"):
        os.replace(os.path.join(staged, name), os.path.join(out, name))
    shutil.rmtree(staged)


def verify_count(args):
    """How many images --verify scores (16 by default when --data is given), and --out checked."""
    n_verify = args.verify if args.verify is not None else (16 if args.data else 0)
    if n_verify < 0:
        fail(f"--verify {n_verify}: a number of images, 0 or more")
    out = os.path.normpath(args.out)
    if os.path.exists(out) and not os.path.isdir(out):
        fail(f"--out {args.out}: exists and is not a folder")
    return n_verify, out


def load_weights(args):
    """The checkpoint's weights (its average with --ema), its config or None, and the whole."""
    state, cfg, ckpt = load_checkpoint(args.checkpoint, args.trust_pickle)
    if args.ema:
        if "ema_state" not in ckpt:
            fail(f"{args.checkpoint}: --ema, but the checkpoint holds no averaged weights")
        state = ckpt["ema_state"]
    return state, cfg, ckpt


def given_config(args):
    """The config of a checkpoint that holds none: --config mnist or a config.json."""
    if not args.config:
        fail(f"{args.checkpoint} holds no config: give --config mnist (or a config.json)")
    if args.config == "mnist":  # the paper's sizes; how it attends, the flags say
        return {k: v for k, v in tm.MNIST_CONFIG.items() if k != "attention"}
    try:
        with open(args.config) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"--config {args.config}: {e}")
    if not isinstance(cfg, dict):
        fail(f"--config {args.config}: not a JSON object")
    return cfg


def resolve_config(args, cfg, state):
    """The model's config: the checkpoint's (or the given one), the size flags over it, its
    attention and feature map resolved and the whole checked; and what was assumed, if anything."""
    if cfg is None:
        cfg = given_config(args)
    cfg = {k: v for k, v in cfg.items() if k not in tm.FILE_KEYS}
    for key in tm.MNIST_CONFIG:
        if key != "attention" and getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    cfg, assumed = resolve_attention(cfg, "attention" in cfg, args, state)
    try:
        tm.check_config(cfg)
    except ValueError as e:
        fail(f"{args.config or args.checkpoint}: {e}")
    return cfg, assumed


def check_weights(state, cfg, assumed):
    """Every tensor the config needs, of its shape, none other, and every value finite."""
    check_omega(state, cfg, assumed)
    check_state(state, cfg)
    for key, tensor in state.items():
        if not torch.isfinite(tensor.float()).all():
            fail(f"tensor {key} holds a non-finite value (NaN or infinity): the engine refuses it")


def verify_images(args, cfg, n_verify):
    """The images --verify scores: the first of --data, else synthetic ones; None without it."""
    if not n_verify:
        return None
    if args.data:
        return read_data(args.data, cfg)[:n_verify]
    from random_model import golden_images
    return golden_images(cfg, n_verify, 0)


def torch_model(cfg, state):
    """The PyTorch reference holding the weights (a 2-D positional table given its batch axis)."""
    model = tm.ImageTransformer(cfg)
    state = dict(state)
    if state["pos_embedding.pe"].dim() == 2:
        state["pos_embedding.pe"] = state["pos_embedding.pe"][None]
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
    return model


def export_meta(args, ckpt, assumed):
    """The safetensors metadata: the source file, its step and images seen, the average, what
    was assumed."""
    meta = {"source": os.path.basename(args.checkpoint)}
    for key in ("step", "images_seen"):
        if key in ckpt:
            meta[key] = ckpt[key]
    if args.ema:
        meta["weights"] = f"exponential moving average, decay {ckpt.get('ema_decay')}"
    if assumed:
        meta["assumed"] = f"{assumed}: the checkpoint does not say (tools/export.py)"
    return meta


def write_verified(args, out, model, meta, images, tarnn):
    """Writes the folder beside --out under a temporary name, verifies it there (images not
    None), then renames it: a refused or interrupted export leaves no folder that looks like a
    good one. Returns what the verification found, for the last line."""
    parent = os.path.dirname(os.path.abspath(out))
    try:
        os.makedirs(parent, exist_ok=True)
        staged = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.", dir=parent)
    except OSError as e:
        fail(f"--out {args.out}: {e.strerror}")
    try:
        try:
            tm.save_model_dir(model, staged, meta, args.dtype)
        except OSError as e:
            fail(f"--out {args.out}: cannot write: {e.strerror}")
        checked = ""
        if images is not None:
            with tempfile.TemporaryDirectory(dir=parent, prefix=".export-verify.") as scratch:
                worst, mean = verify(model, staged, out, images, tarnn, args.dtype, scratch)
            checked = (f"; verified on {len(images)} image{'s' if len(images) != 1 else ''}: "
                       f"bits/dim {mean:.6f}, max difference from PyTorch {worst:.2e}")
        try:
            install(staged, out)
        except OSError as e:
            fail(f"--out {args.out}: cannot write: {e.strerror}")
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return checked


def main(args):
    n_verify, out = verify_count(args)
    tarnn = find_tarnn(args.tarnn) if n_verify else None
    state, cfg, ckpt = load_weights(args)
    cfg, assumed = resolve_config(args, cfg, state)
    check_weights(state, cfg, assumed)
    images = verify_images(args, cfg, n_verify)
    model = torch_model(cfg, state)
    checked = write_verified(args, out, model, export_meta(args, ckpt, assumed), images, tarnn)
    print(f"exported {args.checkpoint} -> {args.out} ({tm.param_count(cfg)} parameters, "
          f"{args.dtype}){checked}")

if __name__ == "__main__":
    main(ARGS)
