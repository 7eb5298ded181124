#!/usr/bin/python3
"""The paper's Table 1 comparison on a GPU, in PyTorch: images/s of step-by-step generation of the
MNIST model (random weights, the same for every form) as softmax attention with a KV cache and as
linear attention in RNN form (S and z per layer), both eager PyTorch on the same device. The
engine's own CUDA figure (tarnn bench --device cuda) is its row beside these; the engine runs its
softmax baselines on the CPU only, so this script is how a lease measures the ratio on a GPU.

    tools/gpu/softmax_baseline.py --batch 1024 [--positions 783] [--device cuda]

Bytes are chosen greedily (the likeliest mixture's mean): the time of sampling is negligible
beside the model's, and the forms are compared on the same work."""
import argparse
import math
import os
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--positions", type=int, default=0, help="0: all 783")
    ap.add_argument("--device", help="cuda or cpu (default: cuda where torch sees a GPU)")
    ap.add_argument("--forms", default="linear,softmax")
    return ap.parse_args()


# The arguments before the heavy imports: --help and a usage error need none of them (any Python).
ARGS = parse_args() if __name__ == "__main__" else None

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tarnn_model as tm  # noqa: E402


def step_layers(model, x, t, cache, kind):
    """One position for every image: x [B, d] at position t; cache holds each layer's K, V
    (softmax) or S, z (linear), updated in place."""
    cfg = model.cfg
    B, H, dh = x.shape[0], cfg["n_heads"], cfg["d_head"]
    for i, layer in enumerate(model.transformer.layers):
        a = layer.attention
        q = a.query_projection(x).view(B, H, dh)
        k = a.key_projection(x).view(B, H, dh)
        v = a.value_projection(x).view(B, H, dh)
        if kind == "softmax":
            K, V = cache[i]
            K[:, :, t] = k
            V[:, :, t] = v
            s = torch.einsum("bhd,bhtd->bht", q, K[:, :, :t + 1]) / math.sqrt(dh)
            att = torch.einsum("bht,bhtd->bhd", torch.softmax(s, -1), V[:, :, :t + 1])
        else:
            S, z = cache[i]
            fq, fk = tm.phi(q), tm.phi(k)
            S += fk[..., :, None] * v[..., None, :]
            z += fk
            att = torch.einsum("bhd,bhde->bhe", fq, S) / ((fq * z).sum(-1, keepdim=True) + 1e-6)
        x = layer.norm1(x + a.out_projection(att.reshape(B, H * dh)))
        x = layer.norm2(x + layer.linear2(layer.act(layer.linear1(x))))
    return model.transformer.norm(x)


@torch.no_grad()
def generate(model, batch, positions, kind, device):
    cfg = model.cfg
    L, H, dh, K = tm.seq_len(cfg), cfg["n_heads"], cfg["d_head"], cfg["mixtures"]
    if kind == "softmax":
        cache = [(torch.zeros(batch, H, L, dh, device=device),
                  torch.zeros(batch, H, L, dh, device=device)) for _ in model.transformer.layers]
    else:
        cache = [(torch.zeros(batch, H, dh, dh, device=device),
                  torch.zeros(batch, H, dh, device=device)) for _ in model.transformer.layers]
    p = torch.zeros(batch, dtype=torch.long, device=device)
    pe = model.pos_embedding.pe[0]
    for t in range(positions):
        x = torch.cat([model.value_embedding(p), pe[t].expand(batch, -1)], -1)
        o = model.predictor(step_layers(model, x, t, cache, kind))
        best = o[:, :K].argmax(-1, keepdim=True)
        mean = o[:, K:2 * K].gather(-1, best)[:, 0]
        p = ((mean.clamp(-1, 1) + 1) * 127.5).round().long()
    return p


def main(args):
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    cfg = dict(tm.MNIST_CONFIG, attention="linear")
    model = tm.ImageTransformer(cfg).to(args.device).eval()
    L = tm.seq_len(cfg)
    n = args.positions or L
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    for kind in args.forms.split(","):
        generate(model, min(args.batch, 8), 4, kind, args.device)  # warm-up
        sync()
        t0 = time.perf_counter()
        generate(model, args.batch, n, kind, args.device)
        sync()
        s = time.perf_counter() - t0
        note = "" if n == L else f" (first {n} of {L} positions, extrapolated: softmax steps grow with t, so its figure is high)"
        print(f"pytorch {kind:8s} batch {args.batch}: {args.batch / s * n / L:.2f} images/s "
              f"({s / n * 1e3:.3f} ms/step){note}", flush=True)


if __name__ == "__main__":
    main(ARGS)
