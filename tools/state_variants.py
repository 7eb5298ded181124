#!/usr/bin/python3
"""16-bit storages of the state S compared in the PyTorch reference (docs/STATE.md): the recurrence
of tools/tarnn_model.py with S stored between positions as fp32, fp16 (scaled by 2^-e(t), the
engine's --state fp16), fp16 unscaled, fp16 of the mean S / (t + 1), and bf16; z in fp32 in every
one. Prints each variant's bits/dim over the first N images of an IDX file, and each image's
change from fp32, as JSON.

    tools/state_variants.py --model models/mnist --images data/mnist/test-images-idx3-ubyte -n 500
"""

import argparse
import json
import os
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--images", required=True, help="an IDX file of the model's images")
    ap.add_argument("-n", type=int, default=500)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--out", help="write the JSON here too")
    return ap.parse_args()


# The arguments before the heavy imports: --help and a usage error need none of them (any Python).
ARGS = parse_args() if __name__ == "__main__" else None

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tarnn_model as tm  # noqa: E402

VARIANTS = ("fp32", "fp16", "fp16-unscaled", "fp16-mean", "bf16")


def main(a):
    model = tm.load_model_dir(a.model).float().eval()
    t_bytes = tm.seq_len(model.cfg) + 1
    raw = np.fromfile(a.images, dtype=np.uint8)
    header = 4 + 4 * int(raw[3])  # IDX: magic, then one 4-byte size per dimension
    x = torch.from_numpy(raw[header:].reshape(-1, t_bytes)[:a.n].astype(np.int64))
    result = {"model": a.model, "images": int(x.shape[0]), "variants": {}}
    for fmt in VARIANTS:
        tm.Attention.state_format = fmt
        t0 = time.time()
        with torch.no_grad():
            bpd = torch.cat([tm.bits_per_dim(model, x[i:i + a.batch])
                             for i in range(0, len(x), a.batch)]).double().numpy()
        result["variants"][fmt] = {"bits_per_dim": bpd.tolist()}
        print(f"{fmt}: {bpd.mean():.6f} bits/dim ({time.time() - t0:.0f} s)", file=sys.stderr)
    tm.Attention.state_format = None
    base = np.array(result["variants"]["fp32"]["bits_per_dim"])
    for fmt in VARIANTS:
        d = np.array(result["variants"][fmt]["bits_per_dim"]) - base
        result["variants"][fmt].update(mean_change=float(d.mean()),
                                       worst_change=float(d[np.argmax(np.abs(d))]))
    text = json.dumps(result)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main(ARGS)
