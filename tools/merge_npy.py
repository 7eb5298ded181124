#!/usr/bin/python3
"""Concatenate the .npy files of `tarnn sample --shard K/N --npy` runs into one, in the order given:

    tools/merge_npy.py all.npy shard-0.npy shard-1.npy shard-2.npy

The shards must hold uint8 images of one shape; the result is written through a memory map (no
shard is held whole) to ALL.npy.partial, then renamed: ALL.npy exists only when complete.
"""

import argparse
import os
import sys


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("shards", nargs="+")
    return ap.parse_args()


# The arguments before the heavy imports: --help and a usage error need none of them (any Python).
ARGS = parse_args() if __name__ == "__main__" else None

import numpy as np  # noqa: E402


def main(args):
    parts = []
    for path in args.shards:
        try:
            a = np.load(path, mmap_mode="r")
        except (OSError, ValueError) as e:
            sys.exit(f"merge_npy: {path}: {e}")
        if a.dtype != np.uint8 or a.ndim != 4 or (parts and a.shape[1:] != parts[0].shape[1:]):
            sys.exit(f"merge_npy: {path}: {a.dtype} {a.shape}, not uint8 images like the others")
        parts.append(a)
    total = sum(len(a) for a in parts)
    tmp = args.out + ".partial"
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.uint8,
                                    shape=(total, *parts[0].shape[1:]))
    at = 0
    for a in parts:
        out[at:at + len(a)] = a
        at += len(a)
    out.flush()
    del out
    os.replace(tmp, args.out)
    print(f"{total} images -> {args.out}")


if __name__ == "__main__":
    main(ARGS)
