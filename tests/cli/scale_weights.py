#!/usr/bin/env python3
"""A model folder whose weights are another's scaled: hostile models for the end-to-end tests.

    scale_weights.py SRC DST PATTERN FACTOR [PATTERN FACTOR ...]

Copies config.json and writes model.safetensors with every F32 tensor whose name matches a
PATTERN (a regular expression, searched) multiplied by its FACTOR. numpy only (no torch).
"""
import json
import os
import re
import shutil
import struct
import sys

import numpy as np

src, dst, rules = sys.argv[1], sys.argv[2], sys.argv[3:]
os.makedirs(dst, exist_ok=True)
shutil.copy(os.path.join(src, "config.json"), os.path.join(dst, "config.json"))
raw = open(os.path.join(src, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
data = bytearray(raw[8 + n:])
for name, info in header.items():
    if name == "__metadata__" or info["dtype"] != "F32":
        continue
    begin, end = info["data_offsets"]
    for pattern, factor in zip(rules[0::2], rules[1::2]):
        if re.search(pattern, name):
            t = np.frombuffer(bytes(data[begin:end]), dtype="<f4") * np.float32(factor)
            data[begin:end] = t.astype("<f4").tobytes()
with open(os.path.join(dst, "model.safetensors"), "wb") as f:
    f.write(raw[:8 + n] + bytes(data))
