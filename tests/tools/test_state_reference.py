#!/usr/bin/python3
"""The engine's --state fp16 against the PyTorch reference of the same storage
(tools/tarnn_model.py: stored_state_numerator, quantize_state): the MNIST-size golden model's
inputs scored both ways in fp32 and in fp16, all 783 positions. Each image's bits/dim agrees to
1e-5 in each format, and the fp16 state moves each image the same way in both (its rounding is
what is emulated, not noise): the engine's change from fp32 within a fifth of the reference's.

    test_state_reference.py TARNN GOLDEN_DIR
"""
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import tarnn_model as tm  # noqa: E402

tarnn, golden = sys.argv[1], sys.argv[2]
if not os.path.exists(os.path.join(golden, "config.json")):
    print(f"skipped: {golden} was not made (the golden fixture needs python3-torch)")
    sys.exit(77)
images = os.path.join(golden, "inputs-idx-ubyte")
raw = np.fromfile(images, dtype=np.uint8)
x = torch.from_numpy(raw[16:].reshape(-1, 784).astype(np.int64))
model = tm.load_model_dir(golden).float().eval()
engine, reference = {}, {}
for fmt in ("fp32", "fp16"):
    out = subprocess.run([tarnn, "score", "--model", golden, "--images", images, "--state", fmt,
                          "--threads", "2", "--json", "--quiet"], capture_output=True, text=True,
                         check=True).stdout
    engine[fmt] = np.array(json.loads(out)["per_image"])
    tm.Attention.state_format = fmt
    with torch.no_grad():
        reference[fmt] = tm.bits_per_dim(model, x).double().numpy()
tm.Attention.state_format = None
failures = []
for fmt in ("fp32", "fp16"):
    gap = np.abs(engine[fmt] - reference[fmt]).max()
    print(f"{fmt}: engine {engine[fmt]}, reference {reference[fmt]}: largest gap {gap:.2e}")
    if gap > 1e-5:
        failures.append(f"{fmt}: the engine is {gap:.2e} bits/dim from the reference")
moved_engine = engine["fp16"] - engine["fp32"]
moved_reference = reference["fp16"] - reference["fp32"]
print(f"fp16 - fp32: engine {moved_engine}, reference {moved_reference}")
if np.any(moved_reference == 0) or np.any(np.abs(moved_engine - moved_reference) >
                                          0.2 * np.abs(moved_reference)):
    failures.append("the fp16 state does not move the engine as it moves the reference")
for f in failures:
    print("FAIL", f)
sys.exit(1 if failures else 0)
