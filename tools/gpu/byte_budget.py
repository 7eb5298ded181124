#!/usr/bin/env python3
"""The byte budget of a GPU step (docs/CUDA.md, "The byte budget"): per kernel, the bytes per image
and step the emulated device counted in two `tarnn bench --device cuda --json-file` runs of an
emulated build (-DTARNN_CUDA_EMULATOR=ON), the weights left out (read once a step for the whole
batch), as a Markdown table: kernel | launches a step | before | after.

    tools/gpu/byte_budget.py BEFORE.json AFTER.json
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
    ap.add_argument("before")
    ap.add_argument("after")
    a = ap.parse_args()
    before, after = counts(a.before), counts(a.after)
    names = list(before) + [n for n in after if n not in before]

    def cell(run, name, i):
        return f"{run[name][i]:,.0f}" if name in run else "-"

    print("| kernel or GEMM | launches a step (before / after) | bytes per image-step before "
          "| after |")
    print("| --- | --- | --- | --- |")
    for n in names:
        state = max(before.get(n, (0, 0, 0))[2], after.get(n, (0, 0, 0))[2])
        label = f"`{n}`" + (" (S and z: " + f"{state:,.0f})" if state else "")
        print(f"| {label} | {cell(before, n, 0)} / {cell(after, n, 0)} | {cell(before, n, 1)} "
              f"| {cell(after, n, 1)} |")
    tb = sum(v[1] for v in before.values())
    ta = sum(v[1] for v in after.values())
    sb = sum(v[2] for v in before.values())
    sa = sum(v[2] for v in after.values())
    print(f"| **a step, the weights left out** | | **{tb:,.0f}** | **{ta:,.0f}** |")
    print(f"| of it not S and z | | {tb - sb:,.0f} | {ta - sa:,.0f} |")


if __name__ == "__main__":
    main()
