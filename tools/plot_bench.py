#!/usr/bin/python3
"""Plot `tarnn bench --json-file` files: the paper's Figure 1 shape and throughput against batch
size (files of every schema version alike, docs/JSON.md).

    tools/plot_bench.py tools/bench/runs/*.json              # figures beside the first input
    tools/plot_bench.py --out-dir docs tools/bench/runs/*.json

writes, one panel per model:
  OUT/bench-time-per-pixel.png  time per pixel (step time / batch) against the position, for each
                                attention: flat for linear attention, growing for softmax. Per
                                (model, attention) the run that measured the most positions.
  OUT/bench-images-per-second.png  images/s against batch size, one line per attention through
                                the medians of repeated runs; a marker per run, open where the
                                figure is extrapolated (--steps < L).
and prints a markdown table of every file (--table-only: only the table). --summary prints
instead the paper's table shape: per model, attention and batch the median images/s over the
files given (repeated runs) and the ratio of the (best) linear median of the same model to each.
"""

import argparse
import collections
import json
import os
import statistics

LABEL = {"linear": "linear (RNN mode)", "softmax": "softmax, KV cache",
         "softmax-recompute": "softmax, recompute prefix"}
COLOR = {"linear": "tab:blue", "softmax": "tab:orange", "softmax-recompute": "tab:red"}
ORDER = ["linear", "softmax", "softmax-recompute"]


def load(paths):
    runs = []
    for p in paths:
        with open(p) as f:
            j = json.load(f)
        j["file"] = p
        runs.append(j)
    return runs


def by_model(runs):
    groups = collections.OrderedDict()
    for r in sorted(runs, key=lambda r: r["model"]):
        groups.setdefault(r["model"], []).append(r)
    return groups


def plot_time_per_pixel(runs, path):
    import matplotlib.pyplot as plt

    groups = by_model(runs)
    fig, axes = plt.subplots(1, len(groups), figsize=(6 * len(groups), 4.5), squeeze=False)
    for ax, (model, rs) in zip(axes[0], groups.items()):
        for att in ORDER:
            cands = [r for r in rs if r["attention"] == att]
            if not cands:
                continue
            r = max(cands, key=lambda r: (r["steps_measured"], r["batch"]))
            t = [p for p, s in r["step_times"]]
            ms = [s / r["batch"] * 1e3 for p, s in r["step_times"]]
            style = "-" if len(t) > 50 else "o-"
            ax.plot(t, ms, style, color=COLOR[att], ms=4, lw=1,
                    label=f"{LABEL[att]}, batch {r['batch']}, {r['machine']['threads']} threads, "
                          f"{len(t)} positions timed")
        ax.set_yscale("log")
        ax.set_xlabel("position t (pixel being generated)")
        ax.set_ylabel("time per pixel per image (ms)")
        ax.set_title(f"{model}: {rs[0]['positions']} positions, {rs[0]['machine']['cpu']}",
                     fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_images_per_second(runs, path):
    import matplotlib.pyplot as plt

    groups = by_model(runs)
    fig, axes = plt.subplots(1, len(groups), figsize=(6 * len(groups), 4.5), squeeze=False)
    for ax, (model, rs) in zip(axes[0], groups.items()):
        for att in ORDER:
            pts = sorted((r["batch"], r["images_per_second"], r["extrapolated"])
                         for r in rs if r["attention"] == att)
            if not pts:
                continue
            b = sorted({p[0] for p in pts})  # the line through the median of repeated runs
            ips = [statistics.median(p[1] for p in pts if p[0] == x) for x in b]
            ax.plot(b, ips, "-", color=COLOR[att], lw=1, label=LABEL[att])
            for x, y, extra in pts:
                ax.plot([x], [y], "o", color=COLOR[att], mfc="white" if extra else COLOR[att])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch size (images generated at once)")
        ax.set_ylabel("images/s, full length")
        ax.set_title(f"{model} (open markers: extrapolated from --steps < L)", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table(runs):
    lines = ["| model | attention | batch | positions timed | images/s | GFLOP/s (of peak) "
             "| memory/image (bytes) | file |",
             "| --- | --- | ---: | --- | ---: | --- | ---: | --- |"]
    key = lambda r: (r["model"], ORDER.index(r["attention"]), r["batch"], r["file"])
    for r in sorted(runs, key=key):
        timed = (f"all {r['positions']}" if not r["extrapolated"]
                 else f"{r['steps_measured']} of {r['positions']} (extrapolated)")
        lines.append(
            f"| {r['model']} | {LABEL[r['attention']]} | {r['batch']} | {timed} "
            f"| {r['images_per_second']:.4g} | {r['gflops_achieved']:.1f} "
            f"({100 * r['peak_fraction']:.0f}% of {r['peak_gflops']:.0f}) "
            f"| {r['memory_bytes_per_image']:,} | {os.path.basename(r['file'])} |")
    return "\n".join(lines)


def summary(runs):
    groups = collections.OrderedDict()
    key = lambda r: (r["model"], ORDER.index(r["attention"]), r["batch"], r["steps_measured"])
    for r in sorted(runs, key=key):
        groups.setdefault(key(r), []).append(r)
    median = {k: statistics.median(r["images_per_second"] for r in rs) for k, rs in groups.items()}
    lines = ["| model | attention | batch | positions timed | runs | images/s, median (min-max) "
             "| linear / this |",
             "| --- | --- | ---: | --- | ---: | --- | ---: |"]
    for k, rs in groups.items():
        model, _, batch, steps = k
        linear = [median[j] for j in groups if j[0] == model and j[1] == 0]
        ratio = f"{max(linear) / median[k]:,.1f}x" if linear else "-"
        ips = [r["images_per_second"] for r in rs]
        timed = (f"all {rs[0]['positions']}" if steps == rs[0]["positions"]
                 else f"{steps} of {rs[0]['positions']} (extrapolated)")
        lines.append(f"| {model} | {LABEL[rs[0]['attention']]} | {batch} | {timed} | {len(rs)} "
                     f"| {median[k]:.4g} ({min(ips):.4g}-{max(ips):.4g}) | {ratio} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("json", nargs="+", help="tarnn bench --json-file files")
    ap.add_argument("--out-dir", default=None,
                    help="where the figures go (default: the first input's folder; never docs/ "
                         "unless asked)")
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("--summary", action="store_true", help="medians and ratios (implies --table-only)")
    args = ap.parse_args()
    runs = load(args.json)
    if args.summary:
        print(summary(runs))
        return
    print(table(runs))
    if args.table_only:
        return
    import matplotlib

    matplotlib.use("Agg")
    if args.out_dir is None:
        args.out_dir = os.path.dirname(os.path.abspath(args.json[0]))
    os.makedirs(args.out_dir, exist_ok=True)
    for name, fn in (("bench-time-per-pixel.png", plot_time_per_pixel),
                     ("bench-images-per-second.png", plot_images_per_second)):
        fn(runs, os.path.join(args.out_dir, name))
        print(f"wrote {os.path.join(args.out_dir, name)}")


if __name__ == "__main__":
    main()
