"""Float64 NumPy references of gllmk's ops, inputs rounded to a dtype, and
the conformance suite's comparison (tests/conformance.h): tol = 1e-5 (f32),
1e-3 (f16), 1e-2 (bf16);
  per element   |out - ref| <= tol * (|ref| + rms(ref) + slack) + tiny
  whole tensor  ||out - ref||_2 <= tol * (||ref||_2 + ||slack||_2) + tiny * sqrt(n)
NumPy has no bfloat16: bf16 arrays are gllmk.BF16 (uint16 bits)."""
import math

import numpy as np

import gllmk

TOL = {"f32": 1e-5, "f16": 1e-3, "bf16": 1e-2}
TINY = {"f32": 2.0 ** -149, "f16": 2.0 ** -24, "bf16": 2.0 ** -133}
FLOATS = ("f32", "f16", "bf16")


def rounded(values, dtype):
    """(array for gllmk of `dtype`, its values as float64)."""
    values = np.asarray(values, dtype=np.float64)
    if dtype == "bf16":
        a = gllmk.BF16.from_float(values.astype(np.float32))
        return a, a.float().astype(np.float64)
    if dtype == "i32":
        a = values.astype(np.int32)
        return a, a.astype(np.float64)
    a = values.astype(np.float32 if dtype == "f32" else np.float16)
    return a, a.astype(np.float64)


def rand(rng, shape, dtype, lo=-1.0, hi=1.0):
    return rounded(rng.uniform(lo, hi, size=shape), dtype)


def f64(a):
    """Values of a gllmk result (numpy, BF16, gllmk.Tensor, torch) as float64."""
    if isinstance(a, gllmk.BF16):
        return a.float().astype(np.float64)
    if isinstance(a, gllmk.Tensor):
        return a.numpy().astype(np.float64)
    if hasattr(a, "detach"):
        return a.detach().float().cpu().numpy().astype(np.float64)
    return np.asarray(a, dtype=np.float64)


def assert_close(out, ref, dtype, slack=None, what=""):
    out, ref = f64(out), np.asarray(ref, dtype=np.float64)
    assert out.shape == ref.shape, "%s: shape %s, expected %s" % (what, out.shape, ref.shape)
    tol, tiny = TOL[dtype], TINY[dtype]
    slack = np.zeros_like(ref) if slack is None else np.broadcast_to(slack, ref.shape)
    finite = np.isfinite(ref)
    assert not np.isnan(out).any(), "%s: NaN in the output" % what
    assert (out[~finite] == ref[~finite]).all(), "%s: infinities differ" % what
    o, r, s = out[finite], ref[finite], slack[finite]
    rms = math.sqrt((r * r).mean()) if r.size else 0.0
    err = np.abs(o - r)
    bad = err > tol * (np.abs(r) + rms + s) + tiny
    assert not bad.any(), "%s: %d of %d elements off, first out=%r ref=%r (tol %g, rms %.3g)" % (
        what, bad.sum(), r.size, o[bad][0], r[bad][0], tol, rms)
    limit = tol * (np.linalg.norm(r) + np.linalg.norm(s)) + tiny * math.sqrt(max(1, r.size))
    assert np.linalg.norm(o - r) <= limit, "%s: ||out-ref|| %.3g > %.3g" % (
        what, np.linalg.norm(o - r), limit)


# ---------------------------------------------------------------- refs

_erf = np.vectorize(math.erf)


def gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def gelu_tanh_slack(x, ref, dtype):
    """conformance.c's gelu_tanh_slack: e^(2u) amplifies F32's rounding of u."""
    u2 = 2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
    return np.where(u2 < 0, np.abs(ref) * -u2 * 4.0 * 2.0 ** -24 / TOL[dtype], 0.0)


def silu(x):
    return x / (1 + np.exp(-x))


def rmsnorm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def layernorm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps) * w
    return y + b if b is not None else y


def softmax(x, scale):
    z = scale * x
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def rope(x, positions, theta, rotary_dim, style, inv_freq=None):
    t, h, d = x.shape
    pairs = rotary_dim // 2
    if inv_freq is None:
        inv_freq = theta ** (-2.0 * np.arange(pairs) / rotary_dim)
    angle = positions.astype(np.float64)[:, None] * inv_freq[None, :]  # [t, pairs]
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    out = x.copy()
    if style == "neox":
        a, b = x[..., :pairs], x[..., pairs:rotary_dim]
        out[..., :pairs] = a * cos - b * sin
        out[..., pairs:rotary_dim] = b * cos + a * sin
    else:
        a, b = x[..., 0:rotary_dim:2], x[..., 1:rotary_dim:2]
        out[..., 0:rotary_dim:2] = a * cos - b * sin
        out[..., 1:rotary_dim:2] = b * cos + a * sin
    return out


def attention(q, k, v, scale, causal, kv_lens=None):
    """(out, lse) as gllmk_attention defines them."""
    b, sq, hq, d = q.shape
    skv, hkv = k.shape[1], k.shape[2]
    group = hq // hkv
    out = np.zeros_like(q)
    lse = np.full((b, hq, sq), -np.inf)
    for bi in range(b):
        length = skv if kv_lens is None else int(kv_lens[bi])
        for h in range(hq):
            kh, vh = k[bi, :length, h // group], v[bi, :length, h // group]
            for i in range(sq):
                seen = length if not causal else min(length, max(0, i + length - sq + 1))
                if seen == 0:
                    continue
                s = scale * (kh[:seen] @ q[bi, i, h])
                m = s.max()
                e = np.exp(s - m)
                out[bi, i, h] = e @ vh[:seen] / e.sum()
                lse[bi, h, i] = m + math.log(e.sum())
    return out, lse


def philox_uniform(seed, offset, row):
    """u in [0, 1) for (seed, offset, row): Philox4x32-10 as docs/api.md says."""
    M = 0xFFFFFFFF
    c = [offset & M, (offset >> 32) & M, row & M, (row >> 32) & M]
    k0, k1 = seed & M, (seed >> 32) & M
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & M, (k1 + 0xBB67AE85) & M
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & M, p1 & M, ((p0 >> 32) ^ c[3] ^ k1) & M, p0 & M]
    return ((c[0] >> 5) * 2.0 ** 26 + (c[1] >> 6)) * 2.0 ** -53


def sample_row(logits, temperature, top_k, top_p, min_p, seed, offset, row):
    """(token, margin): docs/api.md "Sampling, exactly", and how far u * sum
    lies from the nearest boundary between tokens (relative)."""
    logits = np.where(np.isnan(logits), -np.inf, logits)
    if not temperature > 0 or top_k == 1:
        return int(np.argmax(logits)), 1.0
    z = logits / temperature
    ids = np.arange(z.size)
    order = sorted(ids, key=lambda i: (-z[i], i))
    kept = order[:top_k] if top_k > 0 else order
    e = {i: math.exp(z[i] - z[order[0]]) for i in kept}
    total = sum(e.values())
    by_e = sorted(kept, key=lambda i: (-e[i], i))
    if top_p < 1:
        running, prefix = 0.0, []
        for i in by_e:
            prefix.append(i)
            running += e[i]
            if running >= top_p * total:
                break
        by_e = prefix
    if min_p > 0:
        by_e = [i for i in by_e if e[i] >= min_p] or by_e[:1]
    chosen = sorted(by_e)
    mass = sum(e[i] for i in chosen)
    target = philox_uniform(seed, offset, row) * mass
    running, margin = 0.0, float("inf")
    for i in chosen:
        running += e[i]
        margin = min(margin, abs(running - target) / mass)
        if running > target:
            return int(i), margin
    return int(chosen[-1]), margin
