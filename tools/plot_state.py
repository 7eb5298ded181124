#!/usr/bin/python3
"""The figures and tables of docs/STATE.md from the accuracy study's outputs.

    tools/plot_state.py --scores DIR --mnist study-mnist.json --cifar study-cifar10.json --out docs

DIR holds `tarnn score --json-file` outputs named score-PRECISION-STATE.json (the 10,000 test
digits); the study files are tools/state_study.cpp's. Writes OUT/state-error-vs-position.png and
prints the tables (markdown) on stdout.
"""

import argparse
import glob
import json
import os


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scores", required=True)
    ap.add_argument("--mnist", required=True)
    ap.add_argument("--cifar", required=True)
    ap.add_argument("--out", required=True)
    return ap.parse_args()


# The arguments before the heavy imports: --help and a usage error need none of them (any Python).
ARGS = parse_args() if __name__ == "__main__" else None

import numpy as np  # noqa: E402


def load(path):
    with open(path) as f:
        return json.load(f)


def score_table(folder):
    runs = {}
    for path in sorted(glob.glob(os.path.join(folder, "score-*.json"))):
        j = load(path)
        runs[(j["precision"] if "precision" in j else os.path.basename(path).split("-")[1],
              j["state"] if "state" in j else os.path.basename(path).split("-")[2][:-5])] = j
    base = np.array(runs[("fp32", "fp32")]["per_image"])
    print("| GEMMs | state | bits/dim (10,000 test digits) | mean change | worst image's change "
          "| images changed by more than 0.002 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for (p, s), j in sorted(runs.items(), key=lambda kv: (kv[0][0] != "fp32", kv[0][1] != "fp32")):
        b = np.array(j["per_image"])
        d = b - base
        worst = d[np.argmax(np.abs(d))]
        print(f"| {p} | {s} | {b.mean():.6f} | {d.mean():+.2e} | {worst:+.2e} "
              f"| {int((np.abs(d) > 0.002).sum())} |")


def study_table(name, j):
    print(f"\n{name}: {j['images']} images, {j['positions']} positions")
    print("| layer | " + " | ".join(str(i) for i in range(len(j["max_abs_S_per_layer"]))) + " |")
    print("| --- |" + " --- |" * len(j["max_abs_S_per_layer"]))
    print("| max \\|S\\| | " + " | ".join(f"{v:.0f}" for v in j["max_abs_S_per_layer"]) + " |")
    print("| max \\|z\\| | " + " | ".join(f"{v:.0f}" for v in j["max_abs_z_per_layer"]) + " |")
    print(f"share of S's entries beyond 65,504: {j['S_entries_above_65504']:.3g}; below 2^-14 "
          f"(fp16 subnormal): {j['S_entries_below_2^-14']:.3g}")
    fp32 = np.array(j["formats"]["fp32"]["bits_per_dim"])
    print("| state | mean bits/dim | mean change | worst image's change | worst parameter error, "
          "positions: first 10% / last 10% | mean parameter error, first 10% / last 10% |")
    print("| --- | --- | --- | --- | --- | --- |")
    for f, v in j["formats"].items():
        b = np.array(v["bits_per_dim"])
        d = b - fp32
        row = f"| {f} | {b.mean():.6f} | {d.mean():+.2e} | {d[np.argmax(np.abs(d))]:+.2e} |"
        if "worst_param_error_at_t" in v:
            w, m = np.array(v["worst_param_error_at_t"]), np.array(v["mean_param_error_at_t"])
            k = max(1, len(w) // 10)
            row += (f" {w[:k].max():.3g} / {w[-k:].max():.3g} | {m[:k].mean():.3g} / "
                    f"{m[-k:].mean():.3g} |")
        else:
            row += " (the reference) | |"
        print(row)


def plot(studies, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(studies), figsize=(6 * len(studies), 4.2), squeeze=False)
    for ax, (title, j) in zip(axes[0], studies):
        for f, v in j["formats"].items():
            if "mean_param_error_at_t" not in v:
                continue
            m = np.array(v["mean_param_error_at_t"])
            w = np.array(v["worst_param_error_at_t"])
            t = np.arange(len(m))
            line, = ax.plot(t, m, label=f"{f}: mean", lw=1.2)
            ax.plot(t, w, color=line.get_color(), lw=0.6, alpha=0.5, label=f"{f}: worst")
        ax.set_yscale("log")
        ax.set_xlabel("position t")
        ax.set_ylabel("|mixture parameter - fp32's|")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(out, "state-error-vs-position.png")
    fig.savefig(path, dpi=110)
    print(f"\nwrote {path}")


def main(a):
    score_table(a.scores)
    mnist, cifar = load(a.mnist), load(a.cifar)
    study_table("MNIST, the shipped model", mnist)
    study_table("CIFAR-10 shape, random weights", cifar)
    plot([(f"MNIST, shipped model, {mnist['images']} test digits", mnist),
          (f"CIFAR-10 shape, random weights, {cifar['images']} images", cifar)], a.out)


if __name__ == "__main__":
    main(ARGS)
