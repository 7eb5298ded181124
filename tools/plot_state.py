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

from study_plots import changes, error_panels, score_labels, tenths  # noqa: E402


def load(path):
    with open(path) as f:
        return json.load(f)


def score_table(folder):
    runs = {}
    for path in sorted(glob.glob(os.path.join(folder, "score-*.json"))):
        j = load(path)
        runs[score_labels(path, j)] = j
    base = runs[("fp32", "fp32")]["per_image"]
    print("| GEMMs | state | bits/dim (10,000 test digits) | mean change | worst image's change "
          "| images changed by more than 0.002 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for (p, s), j in sorted(runs.items(), key=lambda kv: (kv[0][0] != "fp32", kv[0][1] != "fp32")):
        b = np.array(j["per_image"])
        mean, worst, over = changes(b, base, 0.002)
        print(f"| {p} | {s} | {b.mean():.6f} | {mean:+.2e} | {worst:+.2e} | {over} |")


def study_table(name, j):
    print(f"\n{name}: {j['images']} images, {j['positions']} positions")
    print("| layer | " + " | ".join(str(i) for i in range(len(j["max_abs_S_per_layer"]))) + " |")
    print("| --- |" + " --- |" * len(j["max_abs_S_per_layer"]))
    print("| max \\|S\\| | " + " | ".join(f"{v:.0f}" for v in j["max_abs_S_per_layer"]) + " |")
    print("| max \\|z\\| | " + " | ".join(f"{v:.0f}" for v in j["max_abs_z_per_layer"]) + " |")
    print(f"share of S's entries beyond 65,504: {j['S_entries_above_65504']:.3g}; below 2^-14 "
          f"(fp16 subnormal): {j['S_entries_below_2^-14']:.3g}")
    fp32 = j["formats"]["fp32"]["bits_per_dim"]
    print("| state | mean bits/dim | mean change | worst image's change | worst parameter error, "
          "positions: first 10% / last 10% | mean parameter error, first 10% / last 10% |")
    print("| --- | --- | --- | --- | --- | --- |")
    for f, v in j["formats"].items():
        b = np.array(v["bits_per_dim"])
        mean, worst, _ = changes(b, fp32, 0.002)
        row = f"| {f} | {b.mean():.6f} | {mean:+.2e} | {worst:+.2e} |"
        if "worst_param_error_at_t" in v:
            w0, w1, m0, m1 = tenths(np.array(v["worst_param_error_at_t"]),
                                    np.array(v["mean_param_error_at_t"]))
            row += f" {w0:.3g} / {w1:.3g} | {m0:.3g} / {m1:.3g} |"
        else:
            row += " (the reference) | |"
        print(row)


def plot(studies, out):
    panels = [(title, [(f, np.array(v["mean_param_error_at_t"]),
                        np.array(v["worst_param_error_at_t"]))
                       for f, v in j["formats"].items() if "mean_param_error_at_t" in v])
              for title, j in studies]
    error_panels(panels, os.path.join(out, "state-error-vs-position.png"), (6, 4.2),
                 "|mixture parameter - fp32's|", 8, {"lw": 0.6, "alpha": 0.5, "label": "{}: worst"})


def main(a):
    score_table(a.scores)
    mnist, cifar = load(a.mnist), load(a.cifar)
    study_table("MNIST, the shipped model", mnist)
    study_table("CIFAR-10 shape, random weights", cifar)
    plot([(f"MNIST, shipped model, {mnist['images']} test digits", mnist),
          (f"CIFAR-10 shape, random weights, {cifar['images']} images", cifar)], a.out)


if __name__ == "__main__":
    main(ARGS)
