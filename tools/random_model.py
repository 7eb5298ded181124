#!/usr/bin/python3
"""Write a random-initialised model folder, and optionally golden files for the C++ tests.

    tools/random_model.py --config mnist --seed 1 --out /tmp/m
    tools/random_model.py --config small --seed 1 --out tests/golden/small --golden 3
    tools/random_model.py --config small --seed 1 --attention softmax \
        --out tests/golden/small-softmax --golden 3

--config is mnist (the paper's MNIST size), cifar10, small (a reduced size for committed
goldens) or a path to a config.json. Weights use torch's default initialisation from --seed, with
the LayerNorm weights and biases perturbed so that a loader that ignores them fails the tests.

--attention overrides the config's attention (linear or softmax, same weights for a given seed);
the golden's expected values then come from that attention's parallel form. --feature-map
overrides linear attention's feature map (docs/SPEC.md section 1): a kind, or config.json's
object as JSON, '{"kind": "favor", "n_dims": 8}'; a random-feature map's omega is drawn from
N(0, 1) with --seed (its own generator: the other weights are those of the elu+1 model).

--golden N also writes, from the parallel (causal, equation 9) form of tools/tarnn_model.py run in
float64: inputs-idx-ubyte (N images: random bytes, all black, sparse strokes), expected.json
({"mixture_params": [N][L][3K], "bits_per_dim": [N]}), and expected-bf16.json, the same for
--precision bf16 (tarnn_model.bf16_matmul_inputs: the linear layers' inputs, weights and biases
rounded to bfloat16, and linear attention's q, k and v, everything else as before).
"""

import argparse
import json
import os
import sys


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--config", default="mnist")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"])
    ap.add_argument("--golden", type=int, default=0, help="also write N golden images")
    ap.add_argument("--attention", choices=["linear", "softmax"], help="override the config's")
    ap.add_argument("--feature-map", metavar="KIND|JSON",
                    help="override the config's feature map: a kind (elu+1, relu, favor, ...) or "
                         "config.json's object as JSON; omega is drawn from --seed")
    return ap.parse_args()


# The arguments before the heavy imports: --help and a usage error need none of them (any Python).
ARGS = parse_args() if __name__ == "__main__" else None

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tarnn_model as tm  # noqa: E402
from mnist_data import write_idx  # noqa: E402

CONFIGS = {
    "mnist": tm.MNIST_CONFIG,
    "cifar10": dict(tm.MNIST_CONFIG, height=32, width=32, channels=3, n_layers=16),
    # Two channels, gelu and d_model != n_heads * d_head exercise what MNIST does not.
    "small": dict(height=5, width=4, channels=2, n_layers=2, n_heads=3, d_head=6, d_model=16,
                  d_ff=24, activation="gelu", mixtures=3, attention="linear"),
}


def random_model(cfg, seed):
    torch.manual_seed(seed)
    model = tm.ImageTransformer(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    # A random-feature map's omega, per layer, from its own generator: the other weights of a
    # seed stay those of the elu+1 model (an elementwise map draws nothing).
    omega_rng = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, tm.FeatureMap):
            m.draw(omega_rng)
    return model.eval()


def feature_map_arg(text):
    """--feature-map: a kind, or config.json's object as JSON ('{"kind": "favor", "n_dims": 8}')."""
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except ValueError as e:
            sys.exit(f"random_model: --feature-map {text}: not valid JSON ({e})")
    return {"kind": text}


def golden_images(cfg, n, seed):
    rng = np.random.default_rng(seed)
    t = cfg["height"] * cfg["width"] * cfg["channels"]
    images = np.zeros((n, t), dtype=np.uint8)
    for i in range(n):
        kind = i % 3
        if kind == 0:
            images[i] = rng.integers(0, 256, t)
        elif kind == 2:  # mostly black with white strokes and grey edges, like a digit
            idx = rng.choice(t, size=max(1, t // 5), replace=False)
            images[i, idx] = 255
            images[i, idx[: len(idx) // 3]] = rng.integers(1, 255, len(idx) // 3)
    return images


def main(args):
    if args.config in CONFIGS:
        cfg = CONFIGS[args.config]
    else:
        with open(args.config) as f:
            cfg = json.load(f)
    if args.attention:
        cfg = dict(cfg, attention=args.attention)
    if args.feature_map:
        cfg = dict(cfg, feature_map=feature_map_arg(args.feature_map))
    try:
        tm.check_config(cfg)
    except ValueError as e:
        sys.exit(f"random_model: {e}")
    model = random_model(cfg, args.seed)
    tm.save_model_dir(model, args.out, {"source": f"random init, seed {args.seed}"}, args.dtype)
    if args.golden:
        images = golden_images(cfg, args.golden, args.seed)
        shape = (args.golden, cfg["height"], cfg["width"]) + (
            (cfg["channels"],) if cfg["channels"] > 1 else ())
        write_idx(os.path.join(args.out, "inputs-idx-ubyte"), images.reshape(shape))
        # The reference reads the weights as the engine will (through the file's dtype), in
        # float64, so the expected values measure only the engine's error.
        x = torch.from_numpy(images.astype(np.int64))
        for name, bf16 in (("expected.json", False), ("expected-bf16.json", True)):
            ref = tm.load_model_dir(args.out).double()
            if bf16:
                tm.bf16_matmul_inputs(ref)
            with torch.no_grad():
                o = ref(x[:, :-1])
                lp = tm.log_prob_bytes(o.double(), x[:, 1:], cfg["mixtures"]).double()
            bpd = (-lp.sum(-1) / (lp.shape[-1] * np.log(2.0))).tolist()
            with open(os.path.join(args.out, name), "w") as f:
                json.dump({"mixture_params": o.tolist(), "bits_per_dim": bpd}, f)
    print(f"wrote {args.out} ({tm.param_count(cfg)} parameters)")


if __name__ == "__main__":
    main(ARGS)
