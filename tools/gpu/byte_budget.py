#!/usr/bin/env python3
"""The byte budget of a GPU step (docs/CUDA.md, "The byte budget"): per kernel, the bytes per image
and step the emulated device counted in two or more `tarnn bench --device cuda --json-file` runs of
an emulated build (-DTARNN_CUDA_EMULATOR=ON), the weights left out (read once a step for the whole
batch), as a Markdown table: kernel | launches a step | bytes in each run (before ... after).

    tools/gpu/byte_budget.py BEFORE.json [BETWEEN.json ...] AFTER.json [--labels A,B,...]
"""
import argparse
import json


def counts(path):
    """{kernel: (launches a step, bytes per image-step without the weights, of them the state)}"""
    with open(path) as f:
        run = json.load(f)
    if "emulated_kernels" not in run:
        raise SystemExit(f"{path}: no emulated_kernels (not a bench of the emulated device)")
    out = {}
    for k in run["emulated_kernels"]:
        moved = (k["read_bytes_per_image_step"] + k["written_bytes_per_image_step"]
                 - k["weights_bytes_per_image_step"])
        out[k["name"]] = (k["launches_per_step"], moved, k["state_bytes_per_image_step"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", metavar="RUN.json", help="before, ..., after")
    ap.add_argument("--labels", help="the runs' column names, comma-separated "
                    "(default: before, after; the runs between numbered)")
    a = ap.parse_args()
    if len(a.runs) < 2:
        ap.error("two runs at least: before and after")
    labels = (a.labels.split(",") if a.labels else
              ["before"] + [f"run {i + 2}" for i in range(len(a.runs) - 2)] + ["after"])
    if len(labels) != len(a.runs):
        ap.error(f"{len(labels)} labels for {len(a.runs)} runs")
    runs = [counts(p) for p in a.runs]
    names = []
    for run in runs:
        names += [n for n in run if n not in names]

    def cell(run, name, i):
        return f"{run[name][i]:,.0f}" if name in run else "-"

    print("| kernel or GEMM | launches a step (" + " / ".join(labels) + ") | bytes per image-step "
          + " | ".join(labels) + " |")
    print("| --- | --- |" + " --- |" * len(runs))
    for n in names:
        state = max(run.get(n, (0, 0, 0))[2] for run in runs)
        label = f"`{n}`" + (" (S and z: " + f"{state:,.0f})" if state else "")
        print(f"| {label} | " + " / ".join(cell(r, n, 0) for r in runs) + " | "
              + " | ".join(cell(r, n, 1) for r in runs) + " |")
    totals = [sum(v[1] for v in r.values()) for r in runs]
    states = [sum(v[2] for v in r.values()) for r in runs]
    print("| **a step, the weights left out** | | "
          + " | ".join(f"**{t:,.0f}**" for t in totals) + " |")
    print("| of it not S and z | | "
          + " | ".join(f"{t - s:,.0f}" for t, s in zip(totals, states)) + " |")


if __name__ == "__main__":
    main()
