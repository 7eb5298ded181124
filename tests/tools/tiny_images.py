#!/usr/bin/python3
"""Tiny 6x6 digit-like images for the trainer's tests: a bright bar and a grey bar in each, 32 to
train on (FOLDER/train-idx) and 8 held out (FOLDER/held-idx), the same for every run.
    tiny_images.py FOLDER"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from mnist_data import write_idx  # noqa: E402

rng = np.random.default_rng(0)
imgs = np.zeros((40, 6, 6), np.uint8)
for im in imgs:
    im[rng.integers(0, 6), :] = 255
    im[:, rng.integers(0, 6)] = rng.integers(100, 256)
write_idx(os.path.join(sys.argv[1], "train-idx"), imgs[:32])
write_idx(os.path.join(sys.argv[1], "held-idx"), imgs[32:])
