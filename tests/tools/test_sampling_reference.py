#!/usr/bin/python3
"""The engine against the PyTorch reference (tools/tarnn_model.py in float64) where it draws:
a softmax model (tests/golden/small-softmax), and the sampler's temperature (docs/SPEC.md section
2) on the linear golden (tests/golden/small).

  score   the softmax model's teacher-forced bits/dim, with the prefill (all L positions as rows
          of one forward) and step by step (--no-prefill), within 2e-6 of the reference's,
          relatively (the engine evaluates each position's log-likelihood in fp32: PyTorch's own
          float32 is 1.4e-6 from its float64 on these images, 1.4e-5 bits/dim of 9.6): the
          golden's three images and 16 more (random bytes, a constant, sparse strokes);
  sample  full rollouts of 16 images, of the softmax model at T = 1 and of the linear one at T = 1
          and T = 0.7: each sampled byte p_{t+1} is the one SPEC section 3's sampler
          (Philox4x32-10 of (seed, image, t, 0), written out here, with section 2's temperature)
          draws from the reference's mixture at t, fed the engine's own p_0..p_t; a byte may
          differ only where the reference's draw lies within 1e-3 of a bin edge or of a
          component boundary (the engine's fp32 and the reference's float64 round apart there).

    test_sampling_reference.py TARNN SOURCE_DIR
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

tarnn, source = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(source, "tools"))
import tarnn_model as tm  # noqa: E402
from mnist_data import write_idx  # noqa: E402

golden = os.path.join(source, "tests", "golden", "small-softmax")
model = tm.load_model_dir(golden).double().eval()
cfg = model.cfg
K, T = cfg["mixtures"], cfg["height"] * cfg["width"] * cfg["channels"]
assert cfg["attention"] == "softmax", "the golden is not a softmax model"
failures = []


def engine(*args, model_dir=golden):
    return subprocess.run([tarnn, *args, "--model", model_dir, "--quiet", "--threads", "2"],
                          capture_output=True, text=True, check=True).stdout


# ---- SPEC section 3: Philox4x32-10 and the sampler ----------------------------------------------
M32 = 0xFFFFFFFF


def philox(ctr, k0, k1):
    c = list(ctr)
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & M32, (p0 >> 32) ^ c[3] ^ k1, p0 & M32]
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c


assert philox([0, 0, 0, 0], 0, 0) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]  # Random123


def uniform(w):
    return ((w >> 9) + 0.5) / 2.0**23


def draw(o, seed, image, t, temperature=1.0):
    """The byte drawn from mixture o [3K] (float64) at a temperature (SPEC section 2: the logits
    divided by it, the scales multiplied), and how far the draw is from changing it."""
    K = len(o) // 3
    w = philox([t, 0, image & M32, image >> 32], seed & M32, seed >> 32)
    weights = np.exp((o[:K] - o[:K].max()) / temperature)
    target = uniform(w[0]) * weights.sum()
    cum = np.cumsum(weights)
    k = int(np.argmax(target < cum)) if target < cum[-1] else K - 1
    margin = float(np.abs(cum - target).min() / cum[-1])
    u = np.float32(1e-5) + np.float32(1 - 2e-5) * np.float32(uniform(w[1]))
    scale = temperature * math.exp(max(o[2 * K + k], -7.0))
    x = o[K + k] + scale * (math.log(u) - math.log(1 - u))
    v = (x + 1) * 0.5 * 255 + 0.5
    margin = min(margin, abs(v - round(v)))
    return int(min(max(math.floor(v), 0), 255)), margin


# ---- score: teacher-forced bits/dim ---------------------------------------------------------------
rng = np.random.default_rng(30)
extra = np.zeros((16, T), dtype=np.uint8)
extra[0:6] = rng.integers(0, 256, (6, T))
extra[6:11] = rng.integers(0, 256, (5, 1))
extra[11:16, rng.choice(T, T // 4, replace=False)] = 255
with tempfile.TemporaryDirectory() as work:
    images = os.path.join(work, "images-idx-ubyte")
    given = np.fromfile(os.path.join(golden, "inputs-idx-ubyte"), dtype=np.uint8)[20:]
    every = np.concatenate([given.reshape(-1, T), extra])
    write_idx(images, every.reshape(-1, cfg["height"], cfg["width"], cfg["channels"]))
    with torch.no_grad():
        want = tm.bits_per_dim(model, torch.from_numpy(every.astype(np.int64))).numpy()
    for how in ([], ["--no-prefill"]):
        got = np.array(json.loads(engine("score", "--images", images, "--json", *how))["per_image"])
        gap, rel = np.abs(got - want).max(), (np.abs(got - want) / want).max()
        print(f"score{' ' + how[0] if how else ''}: {len(got)} images, "
              f"max |bits/dim - PyTorch| {gap:.2e} (relative {rel:.2e})")
        if rel > 2e-6:
            failures.append(f"score {how}: {rel:.2e} of the bits/dim from the reference")


# ---- sample: full rollouts' bytes against the reference's mixtures --------------------------------


def check_samples(model_dir, ref, temperature, seed, n=16):
    """n images of the engine at `temperature`, every byte against the reference's draw."""
    size = ref.cfg["height"] * ref.cfg["width"] * ref.cfg["channels"]
    with tempfile.TemporaryDirectory() as work:
        npy = os.path.join(work, "s.npy")
        engine("sample", "-n", str(n), "--seed", str(seed), "--batch", "5", "--npy", npy,
               "--temperature", repr(temperature), model_dir=model_dir)
        sampled = np.load(npy).reshape(n, size)
    with torch.no_grad():
        o = ref(torch.from_numpy(sampled[:, :-1].astype(np.int64))).numpy()  # [n, L, 3K]
    differ, excused, close = [], 0, 0
    for i in range(n):
        for t in range(size - 1):
            byte, margin = draw(o[i, t], seed, i, t, np.float32(temperature))
            close += margin < 1e-3
            if byte != sampled[i, t + 1]:
                differ.append((i, t, byte, int(sampled[i, t + 1]), margin))
                excused += margin < 1e-3
    what = f"sample {os.path.basename(model_dir)} T={temperature}"
    print(f"{what}: {n * (size - 1)} bytes, {n * (size - 1) - len(differ)} drawn as the "
          f"reference draws them ({close} within 1e-3 of an edge; {len(differ)} differ, "
          f"{excused} of them there)")
    if sampled[:, 0].any():
        failures.append(f"{what}: p_0 is not 0")
    for i, t, want_byte, got, margin in differ:
        if margin >= 1e-3:
            failures.append(f"{what}: image {i} position {t}: the engine drew {got}, the "
                            f"reference {want_byte} ({margin:.2e} from an edge)")
    return sampled


check_samples(golden, model, 1.0, 41)
linear_dir = os.path.join(source, "tests", "golden", "small")
linear = tm.load_model_dir(linear_dir).double().eval()
assert linear.cfg["attention"] == "linear", "the small golden is not a linear model"
at_one = check_samples(linear_dir, linear, 1.0, 43)
if np.array_equal(at_one, check_samples(linear_dir, linear, 0.7, 43)):
    failures.append("sample at T = 0.7: the bytes of T = 1")
for f in failures[:10]:
    print("FAIL", f)
sys.exit(1 if failures else 0)
