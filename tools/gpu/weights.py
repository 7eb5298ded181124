#!/usr/bin/env python3
"""The trained weights' way home from a lent GPU (tools/gpu/lease.sh): a model folder in parts
that fit what a call brings back, a manifest with their checksums and the device's score, and the
folder joined again here, bit for bit, and scored against the device's figure. Python's standard
library only: it runs with any python3, on the GPU machine and here.

    weights.py pack MODEL_DIR OUT [--part-bytes N]     there: OUT/weights.part-00.. + weights.json
    weights.py scored OUT/weights.json SCORE.json IMAGES   there: the device's score, added
    weights.py join DIR MODEL [--tarnn T] [--images F] [--limit N]
                                                       here: DIR's parts -> MODEL, re-scored

join checks every part's size and SHA-256 and the whole file's, writes MODEL only when they hold
and when the engine here scores the same images as the device did to within 1e-4 bits/dim each
(the CUDA and CPU backends' stated agreement, tests/cuda/test_cuda.cpp), and leaves nothing
behind otherwise. --limit (default 500) re-scores the device's first N images (0: all of them;
docs/CUDA.md "On a lent GPU" says how long that takes here).
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

MANIFEST = "weights.json"
PART = "weights.part-"
TOLERANCE = 1e-4  # bits/dim per image: the CUDA backend against the CPU's


def fail(msg):
    sys.exit(f"weights: {msg}")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def read_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        fail(f"{what} {path}: {e.strerror}")
    except ValueError as e:
        fail(f"{what} {path}: not JSON ({e})")


def pack(args):
    src = os.path.join(args.model, "model.safetensors")
    cfg = os.path.join(args.model, "config.json")
    for p in (src, cfg):
        if not os.path.isfile(p):
            fail(f"pack: no {p}")
    with open(cfg) as f:
        config_text = f.read()
    os.makedirs(args.out, exist_ok=True)
    parts, total, index = [], os.path.getsize(src), 0
    for old in os.listdir(args.out):
        if old.startswith(PART):
            os.remove(os.path.join(args.out, old))
    with open(src, "rb") as f:
        while True:
            block = f.read(args.part_bytes)
            if not block:
                break
            name = f"{PART}{index:02d}"
            with open(os.path.join(args.out, name), "wb") as g:
                g.write(block)
            parts.append({"file": name, "bytes": len(block),
                          "sha256": hashlib.sha256(block).hexdigest()})
            index += 1
    manifest = {"model": os.path.basename(os.path.normpath(args.model)), "dtype": args.dtype,
                "bytes": total, "sha256": sha256(src), "parts": parts,
                "config.json": config_text, "score": None}
    write_json(os.path.join(args.out, MANIFEST), manifest)
    print(f"weights: {total} bytes ({args.dtype}) in {len(parts)} part(s) of at most "
          f"{args.part_bytes} bytes, and {MANIFEST}")


def scored(args):
    manifest = read_json(args.manifest, "scored:")
    score = read_json(args.score, "scored: the score")
    manifest["score"] = {k: score.get(k) for k in ("device", "device_name", "precision", "state",
                                                   "images", "bits_per_dim", "per_image")}
    manifest["score"]["images_file"] = os.path.basename(args.images)
    manifest["score"]["images_sha256"] = sha256(args.images)
    write_json(args.manifest, manifest)
    print(f"weights: the device's score, bits/dim {score.get('bits_per_dim'):.6f} over "
          f"{score.get('images')} images, in {os.path.basename(args.manifest)}")


def joined(folder, manifest, staged):
    """The parts checked and concatenated into staged/model.safetensors, with config.json."""
    out = os.path.join(staged, "model.safetensors")
    with open(out, "wb") as g:
        for part in manifest["parts"]:
            path = os.path.join(folder, part["file"])
            if not os.path.isfile(path):
                fail(f"join: {path} is missing ({len(manifest['parts'])} parts were sent)")
            with open(path, "rb") as f:
                block = f.read()
            if len(block) != part["bytes"] or hashlib.sha256(block).hexdigest() != part["sha256"]:
                fail(f"join: {path}: {len(block)} bytes, not the {part['bytes']} bytes and "
                     f"SHA-256 the device sent: a part was cut short or changed")
            g.write(block)
    if os.path.getsize(out) != manifest["bytes"] or sha256(out) != manifest["sha256"]:
        fail("join: the joined file is not the one the device packed (size or SHA-256)")
    with open(os.path.join(staged, "config.json"), "w") as f:
        f.write(manifest["config.json"])


def rescore(staged, manifest, args):
    """The engine here over the device's first --limit images: (here, device, worst gap)."""
    score = manifest["score"]
    images = args.images or os.path.join("data", "mnist", score["images_file"])
    if not os.path.isfile(images):
        fail(f"join: the device scored {score['images_file']}; give --images (no {images} here)")
    if sha256(images) != score["images_sha256"]:
        fail(f"join: {images} is not the file the device scored (SHA-256 differs)")
    device = score["per_image"]
    n = min(args.limit, len(device)) if args.limit > 0 else len(device)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "score.json")
        cmd = [args.tarnn, "score", "--model", staged, "--images", images, "--limit", str(n),
               "--quiet", "--json-file", out]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            fail(f"join: {' '.join(cmd[:2])} failed: {run.stderr.strip().splitlines()[-1:]}")
        here = read_json(out, "join: the score")
    gaps = [abs(a - b) for a, b in zip(here["per_image"], device[:n])]
    mean_device = sum(device[:n]) / n
    return here, mean_device, max(gaps), n


def join(args):
    manifest = read_json(os.path.join(args.dir, MANIFEST), "join:")
    model = os.path.normpath(args.model)
    if os.path.exists(model):
        fail(f"join: {model} exists: give a new folder")
    parent = os.path.dirname(os.path.abspath(model))
    os.makedirs(parent, exist_ok=True)
    staged = tempfile.mkdtemp(prefix=f".{os.path.basename(model)}.", dir=parent)
    try:
        joined(args.dir, manifest, staged)
        print(f"join: {len(manifest['parts'])} part(s), {manifest['bytes']} bytes "
              f"({manifest['dtype']}), SHA-256 {manifest['sha256'][:16]}... as packed")
        if not (manifest.get("score") or {}).get("per_image"):
            print("join: the device's call ended before its score: the weights are as packed, "
                  "with no score to compare (tarnn score of the folder gives one)")
        else:
            here, mean_device, worst, n = rescore(staged, manifest, args)
            dev = manifest["score"]
            print(f"join: bits/dim over the first {n} of the device's {len(dev['per_image'])} "
                  f"images: {here['bits_per_dim']:.6f} here ({here['device']}), "
                  f"{mean_device:.6f} on the device ({dev['device']}, {dev['device_name']}); "
                  f"largest difference {worst:.3g} (at most {TOLERANCE:g})")
            if not worst <= TOLERANCE:
                fail(f"join: the engine here and the device differ by {worst:.3g} bits/dim on "
                     f"an image: {model} is not written")
        os.rename(staged, model)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    print(f"join: wrote {model}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("pack", help="a model folder's weights in parts, and the manifest")
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("--part-bytes", type=int, default=15 << 20)
    p.add_argument("--dtype", default="F32", help="what the file holds, for the manifest")
    p = sub.add_parser("scored", help="add the device's score (tarnn score --json-file)")
    p.add_argument("manifest")
    p.add_argument("score")
    p.add_argument("images")
    p = sub.add_parser("join", help="the parts into a model folder, checked and re-scored")
    p.add_argument("dir")
    p.add_argument("model")
    p.add_argument("--tarnn", default="build/tarnn")
    p.add_argument("--images", help="the images the device scored (default: data/mnist/NAME)")
    p.add_argument("--limit", type=int, default=500, help="re-score the first N (0: all)")
    args = ap.parse_args()
    if args.what == "pack" and args.part_bytes < 1:
        fail("pack: --part-bytes must be positive")
    {"pack": pack, "scored": scored, "join": join}[args.what](args)


if __name__ == "__main__":
    main()
