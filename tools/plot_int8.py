#!/usr/bin/python3
"""The tables and the figure of docs/PRECISION.md's int8 study from tools/int8_study.cpp's slices.

    tools/plot_int8.py --study "TITLE=DIR" [--study "TITLE=FILE.json" ...] [--merged-dir D] \
        --out docs

A DIR holds slice-*.json (tools/bench/int8_study_runs.sh), merged here (images in order,
per-position sums added); a FILE is such a merge, as --merged-dir writes them (D/study-mnist-N.json,
N the images: per-image bits/dim to 7 digits, per-position errors to 4). Prints a markdown table
per study (bits/dim, the change against fp32 per image, the mixture parameters' error in the first
and last tenth of the positions) and draws OUT/int8-error-vs-position.png, a panel per study.
--scores FP32.json OTHER.json ...: `tarnn score --json-file` outputs, the same table against the
first.
"""

import argparse
import glob
import json
import os


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--study", action="append", default=[], help="TITLE=DIR or TITLE=FILE.json")
    ap.add_argument("--merged-dir")
    ap.add_argument("--scores", nargs="+")
    ap.add_argument("--out", help="where the figure goes (with --study)")
    return ap.parse_args()


# The arguments before the heavy imports: --help and a usage error need none of them (any Python).
ARGS = parse_args() if __name__ == "__main__" else None

import numpy as np  # noqa: E402

from study_plots import changes, error_panels, score_labels, tenths  # noqa: E402


def load_merged(path):
    j = json.load(open(path))
    for v in j["variants"].values():
        for k, a in v.items():
            if k != "spec":
                v[k] = np.array(a)
    return j


def merge(folder):
    if os.path.isfile(folder):
        return load_merged(folder)
    slices = [json.load(open(p)) for p in glob.glob(os.path.join(folder, "slice-*.json"))]
    if not slices:
        raise SystemExit(f"plot_int8: no slice-*.json in {folder}")
    slices.sort(key=lambda j: j["first"])
    n = sum(j["images"] for j in slices)
    merged = {"model": slices[0]["model"], "first": slices[0]["first"], "images": n,
              "positions": slices[0]["positions"], "variants": {}}
    for name, v in slices[0]["variants"].items():
        e = {"spec": v["spec"],
             "bits_per_dim": np.concatenate([j["variants"][name]["bits_per_dim"] for j in slices])}
        if "sum_param_error_at_t" in v:
            e["worst_param_error_at_t"] = np.max(
                [j["variants"][name]["worst_param_error_at_t"] for j in slices], axis=0)
            e["mean_param_error_at_t"] = np.sum(
                [j["variants"][name]["sum_param_error_at_t"] for j in slices], axis=0) / (
                    n * slices[0]["parameters"])
        merged["variants"][name] = e
    return merged


def table(title, j):
    print(f"\n{title}: {j['images']} images from {j['first']}, {j['positions']} positions")
    print("| variant | layers (from fp32 everywhere) | bits/dim | mean change | worst image's change "
          "| images changed by more than 0.005 | worst parameter error, first / last tenth "
          "| mean parameter error, first / last tenth |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    base = j["variants"]["fp32"]["bits_per_dim"]
    for name, v in sorted(j["variants"].items(), key=lambda kv: kv[0] != "fp32"):
        b = v["bits_per_dim"]
        row = f"| {name} | {v['spec'] or '(none)'} | {b.mean():.6f} |"
        if name == "fp32":
            print(row + " | | | | |")
            continue
        mean, worst, over = changes(b, base, 0.005)
        w0, w1, m0, m1 = tenths(v["worst_param_error_at_t"], v["mean_param_error_at_t"])
        print(row + f" {mean:+.6f} | {worst:+.4f} | {over} | {w0:.3g} / {w1:.3g} "
              f"| {m0:.3g} / {m1:.3g} |")


def scores_table(paths):
    runs = [json.load(open(p)) for p in paths]
    base = runs[0]["per_image"]
    print("\n| precision | state | bits/dim | mean change | worst image's change "
          "| images changed by more than 0.005 | file |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for path, j in zip(paths, runs):
        mean, worst, over = changes(j["per_image"], base, 0.005)
        shown = f"{mean:+.7f} | {worst:+.4f} | {over}" if path != paths[0] else " | |"
        precision, state = score_labels(path, j)
        print(f"| {precision} | {state} | {j['bits_per_dim']:.6f} | {shown} "
              f"| {os.path.basename(path)} |")


def plot(studies, out):
    panels = [(f"{title}: {j['images']:,} MNIST test digits",
               [(name, v["mean_param_error_at_t"], v["worst_param_error_at_t"])
                for name, v in sorted(j["variants"].items()) if "mean_param_error_at_t" in v])
              for title, j in studies]
    error_panels(panels, os.path.join(out, "int8-error-vs-position.png"), (6.5, 4.4),
                 "|mixture parameter - fp32's| (thin: worst)", 7, {"lw": 0.5, "alpha": 0.45})


def write_merged(j, path):
    out = {k: v for k, v in j.items() if k != "variants"}
    out["variants"] = {
        name: {k: ([round(float(x), 7) for x in a] if k == "bits_per_dim" else
                   ([float(f"{x:.4g}") for x in a] if k != "spec" else a))
               for k, a in v.items()} for name, v in j["variants"].items()}
    with open(path, "w") as f:
        json.dump(out, f)
    print(f"wrote {path}")


def main(a):
    studies = []
    for s in a.study:
        title, _, folder = s.partition("=")
        studies.append((title, merge(folder)))
        table(*studies[-1])
    if a.scores:
        scores_table(a.scores)
    if a.merged_dir:
        for _, j in studies:
            write_merged(j, os.path.join(a.merged_dir, f"study-mnist-{j['images']}.json"))
    if studies and a.out:
        plot(studies, a.out)


if __name__ == "__main__":
    main(ARGS)
