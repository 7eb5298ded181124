#!/usr/bin/python3
"""import tarnn, end to end: sample digits, complete occluded test digits, score them, and plot.

    PYTHONPATH=build/python tools/python_example.py --model models/mnist \
        --images data/mnist/test-images-idx3-ubyte --out example.png

Writes one figure: a row of samples, and rows of (occluded | completions | original) digits.
"""

import argparse


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default="models/mnist")
    ap.add_argument("--images", default="data/mnist/test-images-idx3-ubyte")
    ap.add_argument("--out", default="example.png")
    ap.add_argument("--samples", type=int, default=3)
    return ap.parse_args()


# The arguments before the heavy imports: --help and a usage error need none of them (any Python).
ARGS = parse_args() if __name__ == "__main__" else None

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import tarnn  # noqa: E402


def main(args):
    model = tarnn.Model(args.model)
    print(f"{args.model}: {model.parameters} parameters, {model.state_bytes_per_image} bytes of "
          f"state per image, on {model.device}")

    digits = model.sample(8, seed=1, progress=True)  # (8, 28, 28, 1) uint8

    test = tarnn.read_images(args.images)[:4]  # the first four test digits: 7 2 1 0
    h, w = test.shape[1:3]
    known = np.zeros((h, w), bool)
    known[: h // 2] = True  # the top half, as the paper's Figure 3
    done = model.complete(test, known, samples=args.samples, seed=0)  # (4, samples, h, w, 1)
    print("bits/dim of the test digits:", np.round(model.score(test), 3))

    cols = max(8, args.samples + 2)
    fig, axes = plt.subplots(5, cols, figsize=(cols, 5))
    for ax in axes.flat:
        ax.axis("off")
    for i, d in enumerate(digits):
        axes[0, i].imshow(d[..., 0], cmap="gray", vmin=0, vmax=255)
    for r in range(4):
        occluded = np.where(known[..., None], test[r], 0)
        row = [occluded, *done[r], test[r]]
        for c, img in enumerate(row):
            axes[r + 1, c].imshow(img[..., 0], cmap="gray", vmin=0, vmax=255)
    axes[0, 0].set_title("samples", loc="left")
    axes[1, 0].set_title("occluded | completions | original", loc="left")
    fig.savefig(args.out, dpi=100, bbox_inches="tight")
    print("->", args.out)


if __name__ == "__main__":
    main(ARGS)
