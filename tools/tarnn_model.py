"""The SPEC model in plain PyTorch: the paper's autoregressive image transformer.

This is the one Python definition of the model. train.py trains it, export.py writes it,
random_model.py uses it as the parallel (equation 9) reference the C++ engine is tested against.
Tensor names are those of the paper's code (fast-transformers), so its checkpoints load as is.
"""

import difflib
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# config.json's vocabulary, plain data that the tools' argument parsers read without torch
from model_config import (ACTIVATIONS, ATTENTIONS, CONFIG_KEYS, DRAWING_KEYS,  # noqa: E402,F401
                          FEATURE_MAPS, FILE_KEYS, FORMAT_VERSION, KERNEL_FNS, MNIST_CONFIG,
                          OPTIONAL_KEYS)


def feature_map_of(cfg):
    """config.json's feature_map with every parameter the kind uses, the library's defaults filled
    in; a ValueError names anything else (what src/model/config.cpp refuses)."""
    d = cfg["d_head"]
    fm = cfg.get("feature_map")
    if fm is None:
        fm = {"kind": "elu+1"}
    if not isinstance(fm, dict) or not isinstance(fm.get("kind"), str):
        raise ValueError("feature_map must be an object with a \"kind\"")
    kind = fm["kind"]
    if kind not in FEATURE_MAPS:
        raise ValueError(f"feature map {kind!r} is not supported ({', '.join(FEATURE_MAPS)})")
    allowed = FEATURE_MAPS[kind][1] + (DRAWING_KEYS if FEATURE_MAPS[kind][1] else ())
    for key in fm:
        if key != "kind" and key not in allowed:
            raise ValueError(f"feature map {kind!r} takes no {key!r}"
                             + (f" (it takes {', '.join(allowed)})" if allowed else ""))
    out = {"kind": kind}
    if kind in ("elu+1", "relu"):
        return out
    n = fm.get("n_dims", d)
    if not isinstance(n, int) or isinstance(n, bool) or not 2 <= n <= 4096:
        raise ValueError(f"feature map n_dims must be a whole number in [2, 4096] (got {n!r})")
    temp = fm.get("softmax_temp", 1.0 if kind == "generalized_random" else 1 / math.sqrt(d))
    if isinstance(temp, bool) or not isinstance(temp, (int, float)) or not 0 < temp < 1e6:
        raise ValueError(f"feature map softmax_temp must be a number in (0, 1e6) (got {temp!r})")
    out.update(n_dims=n, softmax_temp=float(temp))
    if kind == "smoothed_random_fourier":
        s = fm.get("smoothing", 1.0)
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not 0 <= s < 1e6:
            raise ValueError(f"feature map smoothing must be a number in [0, 1e6) (got {s!r})")
        if n < 3:
            raise ValueError("smoothed_random_fourier needs n_dims of at least 3")
        out["smoothing"] = float(s)
    if kind == "favor":
        if fm.get("stabilize", False) is not False:
            raise ValueError("Favor(stabilize=True) is not supported: it subtracts a maximum over "
                             "the whole sequence, which a model run position by position "
                             "cannot know (train with stabilize=False)")
    if kind == "generalized_random":
        f = fm.get("kernel_fn", "relu")
        if f not in KERNEL_FNS:
            raise ValueError(f"generalized_random kernel_fn {f!r} is not supported "
                             f"({' or '.join(KERNEL_FNS)})")
        out["kernel_fn"] = f
    return out


def omega_columns(fm):
    """The columns of a random-feature map's omega [d_head, columns], as the library sizes it;
    0 for the elementwise maps."""
    kind = fm["kind"]
    if kind in ("random_fourier", "favor"):
        return fm["n_dims"] // 2
    if kind == "smoothed_random_fourier":
        return (fm["n_dims"] - 1) // 2
    if kind == "generalized_random":
        return fm["n_dims"]
    return 0


def feature_count(fm, d_head):
    """F, the width of phi(x): the state S is F x d_head and z is F wide."""
    kind, c = fm["kind"], omega_columns(fm)
    if kind in ("elu+1", "relu"):
        return d_head
    return {"random_fourier": 2 * c, "favor": 2 * c, "smoothed_random_fourier": 2 * c + 1,
            "generalized_random": c}[kind]


def check_config(cfg):
    """What the engine's config.json reader refuses (src/model/config.cpp), refused here too, so that
    nothing is trained or exported that the engine cannot run: unknown keys, missing ones,
    attentions and activations it does not compute."""
    for key in cfg:
        if key not in CONFIG_KEYS + OPTIONAL_KEYS + FILE_KEYS:
            near = difflib.get_close_matches(key, CONFIG_KEYS + OPTIONAL_KEYS + FILE_KEYS, n=1,
                                             cutoff=0)
            raise ValueError(f"unknown config key {key!r} (did you mean {near[0]!r}?)")
    for key in CONFIG_KEYS:
        if key not in cfg:
            raise ValueError(f"config lacks {key!r}")
    if cfg["attention"] not in ATTENTIONS:
        raise ValueError(f"attention {cfg['attention']!r} is not supported "
                         f"({' or '.join(ATTENTIONS)})")
    if cfg["activation"] not in ACTIVATIONS:
        raise ValueError(f"activation {cfg['activation']!r} is not supported "
                         f"({' or '.join(ACTIVATIONS)})")
    if cfg["attention"] == "softmax" and "feature_map" in cfg:
        raise ValueError("a softmax model has no feature map (feature_map is for linear attention)")
    if cfg["attention"] == "linear":
        feature_map_of(cfg)


def seq_len(cfg):
    """L: positions the network sees (the first byte is given, not modelled)."""
    return cfg["height"] * cfg["width"] * cfg["channels"] - 1


def sinusoid_table(n_pos, width):
    """SPEC section 1: P[t, 2i] = sin(t * exp(-2i ln(10000) / width)), P[t, 2i+1] = cos(...)."""
    t = torch.arange(n_pos, dtype=torch.float64)[:, None]
    div = torch.exp(torch.arange(0, width, 2, dtype=torch.float64) * (-math.log(10000.0) / width))
    pe = torch.zeros(n_pos, width, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(t * div)
    pe[:, 1::2] = torch.cos(t * div)
    return pe


def phi(u):
    """The paper's feature map, elu(u) + 1 (equation 7)."""
    return F.elu(u) + 1


class FeatureMap(nn.Module):
    """phi of one head's queries or keys [..., d_head] -> [..., F], as fast-transformers computes
    the kind (SPEC section 1); a random-feature map holds its omega, one per layer for every head,
    under the library's name (...attention.inner_attention.feature_map.omega)."""

    def __init__(self, fm, d_head):
        super().__init__()
        self.fm = fm
        if omega_columns(fm):
            self.register_buffer("omega", torch.zeros(d_head, omega_columns(fm)))

    def draw(self, generator=None):
        """A new omega from N(0, 1), as the library draws it without orthogonal=True."""
        if hasattr(self, "omega"):
            with torch.no_grad():
                self.omega.copy_(torch.randn(self.omega.shape, generator=generator))

    def forward(self, x):
        kind, fm = self.fm["kind"], self.fm
        if kind == "elu+1":
            return phi(x)
        if kind == "relu":
            return F.relu(x)
        if kind != "generalized_random" or fm["softmax_temp"] != 1.0:
            x = x * math.sqrt(fm["softmax_temp"])
        u = x @ self.omega.to(x.dtype)
        if kind == "generalized_random":
            return F.relu(u) if fm["kernel_fn"] == "relu" else phi(u)
        if kind == "favor":
            offset = (x * x).sum(-1, keepdim=True) * 0.5 + 0.5 * math.log(fm["n_dims"])
            return torch.cat([torch.exp(u - offset), torch.exp(-u - offset)], -1)
        m = fm["n_dims"] - (1 if kind == "smoothed_random_fourier" else 0)
        out = torch.cat([torch.cos(u), torch.sin(u)], -1) * math.sqrt(2 / m)
        if kind == "smoothed_random_fourier":
            out = torch.cat([out, torch.full_like(out[..., :1], fm["smoothing"])], -1)
        return out


class InnerAttention(nn.Module):
    """Only a name: fast-transformers' AttentionLayer holds its LinearAttention as inner_attention,
    and that holds the feature map, so omega is saved as ...attention.inner_attention.feature_map."""

    def __init__(self, fm, d_head):
        super().__init__()
        self.feature_map = FeatureMap(fm, d_head)


class PositionalEncoding(nn.Module):
    def __init__(self, n_pos, width):
        super().__init__()
        self.register_buffer("pe", sinusoid_table(n_pos, width).float()[None])  # [1, L, width]


def wide(u):
    """u in at least fp32: bf16 autocast keeps its matmuls, sums of many terms stay exact."""
    return u.to(torch.promote_types(u.dtype, torch.float32))


def causal_numerator(fq, fk, v, chunk=0):
    """sum_{j<=t} (phi(q_t)^T phi(k_j)) v_j for every t: the numerator of equation 9.

    chunk == 0: the masked product, O(L^2), the plain reference. chunk > 0: the same sum in
    blocks of `chunk` positions, masked products inside a block plus the running state
    S = sum phi(k_j) v_j^T of the blocks before (kept in fp32), several times cheaper on a CPU.
    """
    if chunk <= 0:
        return wide((fq @ fk.transpose(-1, -2)).tril() @ v)
    n, h, l, d = v.shape
    pad = -l % chunk
    if pad:
        fq, fk, v = (F.pad(u, (0, 0, 0, pad)) for u in (fq, fk, v))
    blocks = (l + pad) // chunk
    fq, fk, v = (u.reshape(n, h, blocks, chunk, u.shape[-1]) for u in (fq, fk, v))
    intra = wide((fq @ fk.transpose(-1, -2)).tril() @ v)
    kv = wide(fk.transpose(-1, -2) @ v)  # each block's sum of phi(k_j) v_j^T
    S_before = kv.cumsum(2) - kv  # the state entering each block
    num = intra + wide(fq) @ S_before
    return num.reshape(n, h, l + pad, d)[:, :, :l]


def state_exponent(fmt, t):
    """e(t) of kernels/state_format.h: fp16 stores S after position t as S 2^-e(t), exactly."""
    return int(math.floor(math.log2(t + 1))) if fmt == "fp16" and t >= 0 else 0


def quantize_state(s, fmt, t):
    """S after position t as the engine stores it (--state, kernels/state_format.h), read back:
    fp32 unchanged; fp16 of S 2^-e(t), to nearest even, times 2^e(t); bf16 to nearest even (the
    engine also flushes subnormals to zero: below 1.2e-38). For the study (docs/STATE.md), also
    'fp16-unscaled' (fp16 of S itself) and 'fp16-mean' (fp16 of S / (t + 1))."""
    if fmt == "fp32":
        return s
    if fmt in ("fp16", "fp16-unscaled"):
        scale = 2.0 ** state_exponent("fp16" if fmt == "fp16" else "none", t)
        return (s / scale).half().float() * scale
    if fmt == "fp16-mean":
        return (s / (t + 1)).half().float() * (t + 1)
    if fmt == "bf16":
        return s.bfloat16().float()
    raise ValueError(f"unknown state format {fmt!r}")


def stored_state_numerator(fq, fk, v, fmt):
    """The numerator of equation 9 as the engine's recurrence forms it with S stored in `fmt`
    between positions: S_t = stored(S_{t-1}) + phi(k_t) v_t^T, read out in fp32 before it is
    stored (load, widen, update, use, round once, store). fq, fk, v: [n, h, L, d] float32."""
    n, h, l, d = fq.shape
    S = torch.zeros(n, h, d, d, dtype=torch.float32, device=fq.device)
    out = []
    for t in range(l):
        S = S + fk[:, :, t, :, None] * v[:, :, t, None, :]
        out.append((fq[:, :, t, :, None] * S).sum(-2))
        S = quantize_state(S, fmt, t)
    return torch.stack(out, 2)


class Attention(nn.Module):
    """Causal multi-head attention; linear (equations 8-9) or softmax, same weights."""

    chunk = 0  # > 0: causal_numerator's blocked form (train.py sets it)
    state_format = None  # a --state: the recurrence with S stored so (stored_state_numerator)

    def __init__(self, d_model, n_heads, d_head, kind, fm=None):
        super().__init__()
        self.n_heads, self.d_head, self.kind = n_heads, d_head, kind
        self.query_projection = nn.Linear(d_model, n_heads * d_head)
        self.key_projection = nn.Linear(d_model, n_heads * d_head)
        self.value_projection = nn.Linear(d_model, n_heads * d_head)
        self.out_projection = nn.Linear(n_heads * d_head, d_model)
        if kind == "linear":
            self.inner_attention = InnerAttention(fm or {"kind": "elu+1"}, d_head)

    def forward(self, x):
        n, l, _ = x.shape
        split = lambda u: u.view(n, l, self.n_heads, self.d_head).transpose(1, 2)  # [n, h, l, d]
        q = split(self.query_projection(x))
        k = split(self.key_projection(x))
        v = split(self.value_projection(x))
        if self.kind == "linear":
            # a_t = phi(q_t)^T sum_{j<=t} phi(k_j) v_j^T / (phi(q_t)^T sum_{j<=t} phi(k_j) + eps):
            # the causal form of equation 9.
            phi_of = self.inner_attention.feature_map
            fq, fk = phi_of(q), phi_of(k)
            if self.state_format:
                num = stored_state_numerator(fq.float(), fk.float(), v.float(), self.state_format)
            else:
                num = causal_numerator(fq, fk, v, self.chunk)
            z = (wide(fq) * wide(fk).cumsum(-2)).sum(-1, keepdim=True)  # phi(q_t)^T sum phi(k_j)
            out = (num / (z + 1e-6)).to(v.dtype)
        elif self.kind == "softmax":
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.d_head)
            causal = torch.ones(l, l, dtype=torch.bool, device=x.device).tril()
            out = torch.softmax(s.masked_fill(~causal, float("-inf")), -1) @ v
        else:
            raise ValueError(f"unknown attention {self.kind!r}")
        return self.out_projection(out.transpose(1, 2).reshape(n, l, -1))


class EncoderLayer(nn.Module):
    """Post-norm layer of fast-transformers' TransformerEncoderLayer (dropout omitted)."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        fm = feature_map_of(cfg) if cfg["attention"] == "linear" else None
        self.attention = Attention(d, cfg["n_heads"], cfg["d_head"], cfg["attention"], fm)
        self.linear1 = nn.Linear(d, cfg["d_ff"])
        self.linear2 = nn.Linear(cfg["d_ff"], d)
        self.norm1 = nn.LayerNorm(d)
        self.norm2 = nn.LayerNorm(d)
        self.act = {"relu": F.relu, "gelu": F.gelu}[cfg["activation"]]

    def forward(self, x):
        x = self.norm1(x + self.attention(x))
        return self.norm2(x + self.linear2(self.act(self.linear1(x))))


class Encoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg["n_layers"]))
        self.norm = nn.LayerNorm(cfg["d_model"])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class ImageTransformer(nn.Module):
    """Bytes p_0..p_{L-1} in, mixture parameters for p_1..p_L out: [n, L, 3K]."""

    def __init__(self, cfg):
        super().__init__()
        check_config(cfg)
        if cfg["d_model"] % 4:
            raise ValueError("d_model must be a multiple of 4 (two halves of sin/cos pairs)")
        self.cfg = dict(cfg)
        half = cfg["d_model"] // 2
        self.value_embedding = nn.Embedding(256, half)
        self.pos_embedding = PositionalEncoding(seq_len(cfg), half)
        self.transformer = Encoder(cfg)
        self.predictor = nn.Linear(cfg["d_model"], 3 * cfg["mixtures"])

    def forward(self, inputs):
        n, l = inputs.shape
        pos = self.pos_embedding.pe[:, :l].expand(n, l, -1).to(self.value_embedding.weight.dtype)
        x = torch.cat([self.value_embedding(inputs), pos], dim=-1)
        h = self.transformer(x)
        # The head in full precision even under bf16 autocast: bf16 would round the means to about
        # one pixel bin (2/255), and it costs nothing (3K outputs).
        with torch.autocast(device_type=h.device.type, enabled=False):
            return self.predictor(wide(h))


def round_bf16(t):
    """t rounded to bfloat16 (to nearest even) and back to its dtype: the engine's --precision bf16
    rounding of a GEMM's input and weights. (The engine also flushes subnormals to zero, as
    vcvtne2ps2bf16 does: a difference below 1.2e-38.)"""
    return t.to(torch.bfloat16).to(t.dtype)


def bf16_matmul_inputs(model):
    """The reference of the engine's --precision bf16: every linear layer's weights and bias
    rounded to bfloat16 once, its input rounded at each call, the products summed in the model's
    own dtype (float64 for the goldens: products of bf16 values are exact, the sums nearly so);
    with linear attention q, k and v rounded too, after their bias (the engine's bf16 GEMM
    outputs, docs/SPEC.md; TARNN_BF16_OUTPUTS=fp32 is the reference without them);
    phi, the state, LayerNorm and the mixture untouched. In place; returns the model."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.weight.copy_(round_bf16(m.weight))
                if m.bias is not None:
                    m.bias.copy_(round_bf16(m.bias))
                m.register_forward_pre_hook(lambda _, args: (round_bf16(args[0]),))
            if isinstance(m, Attention) and m.kind == "linear":
                for p in (m.query_projection, m.key_projection, m.value_projection):
                    p.register_forward_hook(lambda _, __, out: round_bf16(out))
    return model


def log_prob_bytes(o, target, k):
    """SPEC section 2: log p(target byte) under the discretized logistic mixture o = [..., 3K]."""
    o = wide(o)
    logits, means, log_s = o[..., :k], o[..., k:2 * k], o[..., 2 * k:3 * k].clamp(min=-7.0)
    y = (target.to(o.dtype) / 255.0 * 2.0 - 1.0)[..., None]
    c = y - means
    inv = torch.exp(-log_s)
    plus = inv * (c + 1.0 / 255.0)
    minus = inv * (c - 1.0 / 255.0)
    # sigmoid(plus) - sigmoid(minus) without cancellation (the engine evaluates it the same way)
    cdf_delta = torch.sigmoid(plus) * torch.sigmoid(-minus) * -torch.expm1(minus - plus)
    mid = inv * c
    log_mid = mid - log_s - 2.0 * F.softplus(mid) - math.log(127.5)
    log_inner = torch.where(cdf_delta > 1e-5, torch.log(cdf_delta.clamp(min=1e-12)), log_mid)
    t = target[..., None].expand_as(c)
    log_p = torch.where(t == 0, plus - F.softplus(plus),
                        torch.where(t == 255, -F.softplus(minus), log_inner))
    return torch.logsumexp(torch.log_softmax(logits, -1) + log_p, -1)


def bits_per_dim(model, images):
    """Teacher-forced bits/dim of byte images [n, T]: one value per image."""
    o = model(images[:, :-1].long())
    lp = log_prob_bytes(o, images[:, 1:].long(), model.cfg["mixtures"])
    return -lp.sum(-1) / (lp.shape[-1] * math.log(2.0))


# ---- model folders: config.json + model.safetensors (SPEC section 4) -------------------------

def state_dict_for_export(model):
    """Tensors under the SPEC names: pos_embedding.pe is stored [L, d_model/2]."""
    out = {}
    for name, t in model.state_dict().items():
        out[name] = t[0] if name == "pos_embedding.pe" else t
    return out


def _encode(t, dtype):
    a = t.detach().cpu().float().contiguous().numpy()
    if dtype == "F32":
        return a.astype("<f4").tobytes()
    if dtype == "F16":
        return a.astype("<f2").tobytes()
    if dtype == "BF16":  # round to nearest even, as torch does
        u = a.astype("<f4").view(np.uint32).astype(np.uint64)
        u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        return u.astype("<u2").tobytes()
    raise ValueError(f"unknown dtype {dtype}")


def write_safetensors(path, tensors, metadata=None, dtype="F32"):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        blob = _encode(tensors[name], dtype)
        header[name] = {"dtype": dtype, "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # align the data to 8 bytes, as the format recommends
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for blob in blobs:
            f.write(blob)
    os.replace(tmp, path)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    base = 8 + n
    dtypes = {"F32": np.float32, "F16": np.float16}
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        if info["dtype"] == "BF16":
            u = np.frombuffer(raw[base + b:base + e], dtype="<u2").astype(np.uint32) << 16
            a = u.view(np.float32)
        else:
            a = np.frombuffer(raw[base + b:base + e], dtype=dtypes[info["dtype"]]).astype(np.float32)
        out[name] = torch.from_numpy(a.reshape(info["shape"]).copy())
    return out


def config_for_file(cfg):
    """config.json's keys: the model's, and for linear attention its feature map written out with
    every parameter (the library's defaults filled in), so the folder says what it computes."""
    out = {"format_version": FORMAT_VERSION, "model_type": "tarnn-image-transformer"}
    out.update({k: cfg[k] for k in CONFIG_KEYS})
    if cfg["attention"] == "linear":
        out["feature_map"] = feature_map_of(cfg)
    return out


def save_model_dir(model, folder, metadata=None, dtype="F32"):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config_for_file(model.cfg), f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(folder, "model.safetensors"), state_dict_for_export(model),
                      metadata, dtype)


def load_model_dir(folder):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    model = ImageTransformer(cfg)
    tensors = read_safetensors(os.path.join(folder, "model.safetensors"))
    tensors["pos_embedding.pe"] = tensors["pos_embedding.pe"][None]
    model.load_state_dict(tensors, strict=True)
    return model


def param_count(cfg):
    """Parameters as the paper counts them: the stored positional table included."""
    return sum(t.numel() for t in state_dict_for_export(ImageTransformer(cfg)).values())


# Entries only a TorchScript archive holds (torch.jit.save's, or the lite interpreter's): torch.load
# hands a zip holding constants.pkl to torch.jit.load, which runs the archive's code (a class's
# __setstate__, as it loads), whatever weights_only says (torch 1.13; 2.6 on refuse it).
TORCHSCRIPT_ENTRIES = ("constants.pkl", "bytecode.pkl", "code/")


def unsafe_checkpoint(data):
    """Why torch.load(weights_only=True) would not leave the bytes `data` to its weights-only
    unpickler alone, or None; read before torch sees them. The routes around that unpickler in
    torch 1.13's and 2.x's torch/serialization.py (load, _legacy_load):
    - a zip (torch's test: its first 4 bytes) holding constants.pkl goes to torch.jit.load. Its
      entries are listed as torch lists them (its own zip reader, the archive's folder left out)
      and as Python's zipfile does (whatever the folder), so neither reader hides one;
    - the legacy tar format: torch 1.13 unpacks its members (links and FIFOs too) into a
      temporary folder before its unpickler reads them, and 2.6 on refuse it;
    - anything else (the zip torch.save writes, or a legacy pickle) is unpickled weights-only by
      both, every pickle in it."""
    import io
    import tarfile
    import zipfile
    if data[:4] == b"PK\x03\x04":
        names = []
        for reader in (lambda b: torch._C.PyTorchFileReader(b).get_all_records(),
                       lambda b: zipfile.ZipFile(b).namelist()):
            try:
                names += reader(io.BytesIO(data))
            except Exception:  # a zip this reader cannot read: torch.load fails on it, or not
                pass           # through that reader
        for entry in TORCHSCRIPT_ENTRIES:
            folder = entry.endswith("/")
            if any(entry.rstrip("/") in (n.split("/")[:-1] if folder else n.split("/"))
                   for n in names):
                return (f"is a TorchScript archive (it holds {entry}): torch.load would run its "
                        f"code whatever weights_only says (torch before 2.6 hands it to "
                        f"torch.jit.load)")
        return None
    try:  # as torch 1.13's _legacy_load opens it
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:", format=tarfile.PAX_FORMAT):
            pass
    except tarfile.TarError:
        return None
    return ("is in torch's legacy tar format: torch 1.13 unpacks its members onto the disk before "
            "its weights-only check (2.6 on refuse it)")


def load_pt(path, trust_pickle=False):
    """A .pt/.pth file, read with torch's weights-only loader: tensors, ints, strings, lists and
    dicts, and no code runs. A .pt is a Python pickle, and a full pickle can run whatever code its
    author put in it; this loader refuses those (train.py's checkpoints before 2026-11-22, the
    paper's with their optimizer state: torch 1.13's weights-only loader rejects Python floats),
    and what torch would not leave to that loader (unsafe_checkpoint: TorchScript, legacy tar),
    unless trust_pickle is set, and then says so on stderr. torch reads the bytes that were
    checked, not the path again: a file replaced in between cannot slip past."""
    import io
    import sys
    if not os.path.isfile(path):
        raise OSError(f"{path}: no such file")
    with open(path, "rb") as f:
        data = f.read()
    why, detail = unsafe_checkpoint(data), ""
    if not why:
        try:
            return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        except Exception as e:  # torch 1.13 raises UnpicklingError or RuntimeError for these
            why = ("is not a weights-only file: loading it would run its pickle, which can "
                   "execute code")
            detail = f" ({str(e).splitlines()[-1][:80]})"
    if not trust_pickle:
        raise PermissionError(f"{path} {why}; if you made it or trust its source, pass "
                              f"--trust-pickle{detail}")
    print(f"warning: {path}: loading a full pickle (--trust-pickle): it can run code",
          file=sys.stderr)
    return torch.load(path, map_location="cpu")
