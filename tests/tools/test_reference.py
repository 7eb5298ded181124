#!/usr/bin/python3
"""The PyTorch reference's own checks: its blocked (training) form of causal linear attention
equals the plain masked form (equation 9) in float64, and its loss is a normalised distribution.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import tarnn_model as tm  # noqa: E402

failures = []
checks = [0]


def check(name, ok, detail=""):
    checks[0] += 1
    print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}")
    if not ok:
        failures.append(name)


torch.manual_seed(0)
fq, fk = torch.rand(2, 3, 101, 5, dtype=torch.float64), torch.rand(2, 3, 101, 5, dtype=torch.float64)
v = torch.randn(2, 3, 101, 5, dtype=torch.float64)
plain = tm.causal_numerator(fq, fk, v, 0)
naive = torch.stack([torch.einsum("nhd,nhjd,nhje->nhe", fq[:, :, t], fk[:, :, :t + 1],
                                  v[:, :, :t + 1]) for t in range(101)], 2)
check("masked form equals the sum over j <= t", torch.allclose(plain, naive, atol=1e-12))
for chunk in (1, 7, 32, 101, 200):
    err = (tm.causal_numerator(fq, fk, v, chunk) - plain).abs().max().item()
    check(f"blocked form, chunk {chunk}", err < 1e-12, f"(max error {err:.2e})")

model = tm.ImageTransformer(tm.MNIST_CONFIG).double().eval()
x = torch.randint(0, 256, (2, 784))
with torch.no_grad():
    a = tm.bits_per_dim(model, x)
    tm.Attention.chunk = 32
    b = tm.bits_per_dim(model, x)
    tm.Attention.chunk = 0
check("MNIST-size model: blocked and plain bits/dim", (a - b).abs().max().item() < 1e-10)

# The training's fast form (tools/train.py on a GPU: the blocked attention at a chunk that suits
# the device) against the plain masked form, in float32 as it trains: the loss to 1e-5 and every
# parameter's gradient to 1e-4 of the largest gradient of its tensor.
torch.manual_seed(1)
small = tm.ImageTransformer(dict(tm.MNIST_CONFIG, n_layers=2, d_model=64, d_ff=128)).float()
batch = torch.randint(0, 256, (3, 784))
grads, losses = {}, {}
for chunk in (0, 64):
    tm.Attention.chunk = chunk
    small.zero_grad()
    loss = tm.bits_per_dim(small, batch).mean()
    loss.backward()
    losses[chunk] = loss.item()
    grads[chunk] = {n: p.grad.clone() for n, p in small.named_parameters()}
tm.Attention.chunk = 0
worst = max(((grads[64][n] - g).abs().max() / g.abs().max().clamp(min=1e-12)).item()
            for n, g in grads[0].items())
check("training's blocked form (chunk 64): the loss", abs(losses[64] - losses[0]) < 1e-5 * losses[0],
      f"({losses[0]:.7f} and {losses[64]:.7f})")
check("training's blocked form (chunk 64): every gradient", worst < 1e-4, f"(worst {worst:.2e})")

o = torch.randn(4, 30, dtype=torch.float64)
lp = torch.stack([tm.log_prob_bytes(o, torch.full((4,), b), 10) for b in range(256)])
total = lp.exp().sum(0)
check("loss is a distribution over the 256 bytes", torch.allclose(total, torch.ones(4, dtype=torch.float64), atol=1e-6),
      f"(sums {total.tolist()})")

# The storage of S for --state (tools/tarnn_model.py: quantize_state), as kernels/state_format.h:
# fp16 of S 2^-e(t), e(t) = floor(log2(t + 1)), a power of two, so it rounds as plain fp16 does
# where plain fp16 has the range; and beyond 65504, where plain fp16 overflows, it does not.
s = torch.tensor([3.7, 0.1, 65000.0, 1.0e6])
check("fp16 state: e(t) is floor(log2(t + 1))",
      [tm.state_exponent("fp16", t) for t in (-1, 0, 1, 2, 3, 782)] == [0, 0, 1, 1, 2, 9])
scaled, plain = tm.quantize_state(s, "fp16", 782), tm.quantize_state(s, "fp16-unscaled", 782)
check("fp16 state: the scale changes no rounding within fp16's range",
      torch.equal(scaled[:3], plain[:3]), f"({scaled.tolist()} {plain.tolist()})")
check("fp16 state: beyond it the scaled form holds what plain fp16 cannot",
      torch.isinf(plain[3]).item() and abs(scaled[3].item() - 1e6) < 1e6 * 2 ** -10)
check("fp32 state: unchanged", torch.equal(tm.quantize_state(s, "fp32", 5), s))

print(f"{checks[0] - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
