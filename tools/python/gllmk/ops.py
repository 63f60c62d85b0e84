"""Every op of gllmk_ops.def as a function on arrays (numpy, torch,
gllmk.Tensor, gllmk.BF16, anything with __dlpack__).

Each takes its inputs, optional scalars, `out=` (write there; else a new
array is made with the first input's library) and `context=` (else: the
cuda context of a torch CUDA tensor's device and current stream, the context
of a gllmk.Tensor, or gllmk.default_context() for host arrays). Every
function is also a method of Context (ctx.rmsnorm(x, w)). Arguments go to
gllmk unchanged (strided views stay strided): gllmk validates them and its
message comes back as a gllmk.Error.
"""
import math
import sys

from . import _capi
from .context import Context, cuda_context, default_context
from .tensors import MEMORY_CUDA_DEVICE, check_writable, describe, empty_like

_GELU = {"none": 0, "erf": 0, "tanh": 1}
_ROPE = {"neox": 0, "gptj": 1}
_LAYOUT = {"nk": 0, "kn": 1}
_GLU = {None: 0, "swiglu": 1}


_current_stream = []  # how to read torch's current stream, found once


def _torch_stream(torch, index):
    """The raw CUstream PyTorch's current stream on device `index` is."""
    if not _current_stream:
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _current_stream.append(raw or (lambda i: torch.cuda.current_stream(i).cuda_stream))
    return _current_stream[0](index)


def context_for(d):
    """The context an array uses when no context= is given (d: a Desc)."""
    if d.lib == "gllmk":
        return d.obj.context
    if d.kind == MEMORY_CUDA_DEVICE:
        stream = _torch_stream(sys.modules["torch"], d.device) if d.lib == "torch" else 1
        return cuda_context(d.device, stream)
    return default_context()


def _dtype_name(dtype):
    if dtype is None or dtype in _capi.DTYPE_ID:
        return dtype
    name = str(dtype).replace("torch.", "")
    names = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int32": "i32"}
    if name not in names and "numpy" in sys.modules:
        try:
            name = sys.modules["numpy"].dtype(dtype).name
        except TypeError:
            pass
    if name in names:
        return names[name]
    raise _capi.UnsupportedError(_capi.UNSUPPORTED,
                                 "gllmk: dtype %s is not f32, f16, bf16 or i32" % dtype)


def _op(name, arrays, scalars, context, out=None, shape=None, like=None, dtype=None,
        written=("out",), extra_out=None):
    """Describes `arrays` ({field: array or None}), makes `out` if it is None
    (shape(descs) with `like`'s library and dtype, or `dtype`), runs the op
    and returns out. extra_out: {field: array}, more outputs."""
    stream = 1 if context is None else context.stream
    descs = {}
    first = None
    for field, array in arrays.items():
        if array is not None:
            d = descs[field] = describe(array, field, stream)
            if first is None:
                first = d
    if out is not None:
        first = first or describe(out, "out", stream)
        descs["out"] = describe(out, "out", stream) if first.obj is not out else first
    if extra_out:
        for field, array in extra_out.items():
            descs[field] = describe(array, field, stream)
    if context is None:
        context = context_for(first)
    if out is None and shape is not None:
        template = descs[like]
        out = empty_like(template, shape(descs), dtype or template.dtype)
        descs["out"] = describe(out, "out", stream)
    for field in written:
        d = descs.get(field)
        if d is not None and d.lib in ("numpy", "bf16"):
            check_writable(d, field)
    context.run(name, descs, scalars)
    return out


def _same(field):
    return lambda descs: descs[field].shape


def copy(src, *, dtype=None, out=None, context=None):
    """out = src converted to out's dtype (src may have any strides)."""
    return _op("copy", {"src": src}, {}, context, out, _same("src"), "src", _dtype_name(dtype))


def fill(out, value, *, context=None):
    """out[...] = value (rounded to out's dtype); returns out."""
    return _op("fill", {}, {"value": value}, context, out)


def add(a, b, *, out=None, context=None):
    """a + b; b has a's shape or is 1-D of a's last dim."""
    return _op("add", {"a": a, "b": b}, {}, context, out, _same("a"), "a")


def mul(a, b, *, out=None, context=None):
    """a * b; b has a's shape or is 1-D of a's last dim."""
    return _op("mul", {"a": a, "b": b}, {}, context, out, _same("a"), "a")


def mul_add(a, b, c, *, out=None, context=None):
    """a * b + c; b and c each a's shape or 1-D."""
    return _op("mul_add", {"a": a, "b": b, "c": c}, {}, context, out, _same("a"), "a")


def silu(x, *, out=None, context=None):
    """x * sigmoid(x)."""
    return _op("silu", {"x": x}, {}, context, out, _same("x"), "x")


def gelu(x, *, approximate="none", out=None, context=None):
    """gelu(x), exact ("none") or "tanh" (torch's F.gelu spelling)."""
    return _op("gelu", {"x": x}, {"kind": _GELU[approximate]}, context, out, _same("x"), "x")


def add_gelu(x, bias, *, approximate="none", out=None, context=None):
    """gelu(x + bias), bias 1-D of x's last dim: F.gelu(x + b) in one pass."""
    return _op("add_gelu", {"x": x, "bias": bias}, {"kind": _GELU[approximate]}, context, out,
               _same("x"), "x")


def swiglu(gate, up, *, out=None, context=None):
    """silu(gate) * up (gate and up may be column slices of one array)."""
    return _op("swiglu", {"gate": gate, "up": up}, {}, context, out, _same("gate"), "gate")


def rmsnorm(x, weight, *, eps=1e-5, out=None, context=None):
    """x / sqrt(mean(x^2) + eps) * weight over the last dim."""
    return _op("rmsnorm", {"x": x, "weight": weight}, {"eps": eps}, context, out, _same("x"), "x")


def add_rmsnorm(residual, x, weight, *, eps=1e-5, out=None, context=None):
    """residual += x (in place); returns rmsnorm(residual)."""
    return _op("add_rmsnorm", {"residual": residual, "x": x, "weight": weight}, {"eps": eps},
               context, out, _same("residual"), "residual", written=("out", "residual"))


def layernorm(x, weight, bias=None, *, eps=1e-5, out=None, context=None):
    """(x - mean) / sqrt(var + eps) * weight (+ bias) over the last dim."""
    return _op("layernorm", {"x": x, "weight": weight, "bias": bias}, {"eps": eps}, context, out,
               _same("x"), "x")


def softmax(x, *, scale=1.0, out=None, context=None):
    """softmax(scale * x) over the last dim."""
    return _op("softmax", {"x": x}, {"scale": scale}, context, out, _same("x"), "x")


def rope(x, positions, *, theta=10000.0, rotary_dim=None, style="neox", inv_freq=None, out=None,
         context=None):
    """Rotary embedding of x [tokens, heads, head_dim] at I32 positions
    [tokens]; style "neox" (half split) or "gptj" (interleaved); inv_freq
    (F32 [rotary_dim/2]) replaces theta's frequencies."""
    descs_x = describe(x, "x")
    rotary_dim = descs_x.shape[-1] if rotary_dim is None else rotary_dim
    return _op("rope", {"x": x, "positions": positions, "inv_freq": inv_freq},
               {"theta": theta, "rotary_dim": rotary_dim, "style": _ROPE[style]}, context, out,
               _same("x"), "x")


def embedding(ids, table, *, out=None, context=None):
    """table[ids] (F.embedding's order): ids I32 of any shape."""
    return _op("embedding", {"ids": ids, "table": table}, {}, context, out,
               lambda d: d["ids"].shape + d["table"].shape[-1:], "table")


def matmul(a, b, bias=None, *, layout="nk", alpha=1.0, beta=0.0, allow_tf32=False, rms_eps=None,
           rope=None, glu=None, kv=None, out=None, context=None):
    """alpha * a @ op(b) + beta * out (+ bias). layout "nk": b is [N, K], a
    Linear weight (F.linear(a, b, bias)); "kn": b is [K, N] (a @ b). With
    rms_eps, each row of a is first divided by sqrt(mean(row^2) + rms_eps)
    (a_norm: an RMSNorm without weight). rope, a dict with positions (I32
    [M]), head_dim, columns, and optionally rotary_dim (head_dim), theta
    (10000) or inv_freq: the output's first `columns` columns turned as
    gllmk.rope(style="gptj") turns heads of head_dim (a 2-D a, beta 0).
    glu="swiglu": silu(P[:, :N/2]) * P[:, N/2:] of the product P, as
    gllmk.swiglu of its halves ([M, N/2] out; a 2-D a, beta 0). kv, a dict
    with k_cache, v_cache ([blocks, block_size, Hkv, D]), slots (I32 [M])
    and first: out's columns from `first` also written into the caches as
    gllmk.kv_append writes k, then v (a 2-D a). Not every backend takes
    every shape of these."""
    if beta != 0 and out is None:
        raise ValueError("gllmk.matmul: beta != 0 reads out: pass out=")
    b_layout = _LAYOUT[layout]
    glu_kind = _GLU[glu]

    def shape(d):
        n = d["b"].shape[-2] if b_layout == 0 else d["b"].shape[-1]
        return d["a"].shape[:-1] + (n // 2 if glu_kind else n,)
    rope = rope or {}
    kv = kv or {}
    head_dim = rope.get("head_dim", 0)
    return _op("matmul", {"a": a, "b": b, "bias": bias, "rope_positions": rope.get("positions"),
                          "rope_inv_freq": rope.get("inv_freq"), "kv_k_cache": kv.get("k_cache"),
                          "kv_v_cache": kv.get("v_cache"), "kv_slots": kv.get("slots")},
               {"alpha": alpha, "beta": beta, "b_layout": b_layout, "flags": int(allow_tf32),
                "a_norm": int(rms_eps is not None), "a_norm_eps": rms_eps or 0.0,
                "rope_dim": rope.get("rotary_dim", head_dim), "rope_head_dim": head_dim,
                "rope_columns": rope.get("columns", 0), "rope_theta": rope.get("theta", 10000.0),
                "glu": glu_kind, "kv_first": kv.get("first", 0)},
               context, out, shape, "a", written=("out", "kv_k_cache", "kv_v_cache"))


def attention(q, k, v, *, scale=None, causal=False, kv_lens=None, lse=None, return_lse=False,
              out=None, context=None):
    """Flash attention: q [B, Sq, Hq, D], k and v [B, Skv, Hkv, D]; scale
    defaults to 1/sqrt(D). return_lse=True (or lse=array) also gives the F32
    log-sum-exp [B, Hq, Sq]: returns (out, lse)."""
    qd = describe(q, "q")
    scale = 1.0 / math.sqrt(qd.shape[-1]) if scale is None else scale
    if return_lse and lse is None:
        lse = empty_like(qd, (qd.shape[0], qd.shape[2], qd.shape[1]), "f32")
    result = _op("attention", {"q": q, "k": k, "v": v, "kv_lens": kv_lens},
                 {"scale": scale, "causal": int(bool(causal))}, context, out, _same("q"), "q",
                 written=("out", "lse"), extra_out=None if lse is None else {"lse": lse})
    return (result, lse) if return_lse else result


def kv_append(k_cache, v_cache, k, v, slots, *, context=None):
    """Writes k, v [T, Hkv, D] into the paged caches at I32 slots [T]."""
    _op("kv_append", {"k_cache": k_cache, "v_cache": v_cache, "k": k, "v": v, "slots": slots},
        {}, context, written=("k_cache", "v_cache"))


def paged_attention(q, k_cache, v_cache, block_table, q_starts, seq_lens, *, scale=None,
                    out=None, context=None):
    """Attention of q [T, Hq, D] (B sequences back to back, q_starts [B+1])
    over paged caches [blocks, block_size, Hkv, D] through block_table [B, max_blocks]."""
    head_dim = describe(q, "q").shape[-1]
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    return _op("paged_attention", {"q": q, "k_cache": k_cache, "v_cache": v_cache,
                                   "block_table": block_table, "q_starts": q_starts,
                                   "seq_lens": seq_lens}, {"scale": scale}, context, out,
               _same("q"), "q")


def _rows(d):
    return d["logits"].shape[:-1] or (1,)


def argmax(logits, *, out=None, context=None):
    """Index of each row's largest logit (I32, one per row)."""
    return _op("argmax", {"logits": logits}, {}, context, out, _rows, "logits", "i32")


def sample(logits, *, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=0, offset=0,
           out=None, context=None):
    """One token per row (I32), drawn as docs/api.md "Sampling, exactly" says."""
    return _op("sample", {"logits": logits},
               {"temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p,
                "seed": seed, "offset": offset}, context, out, _rows, "logits", "i32")


OPS = ("copy", "fill", "add", "mul", "mul_add", "silu", "gelu", "add_gelu", "swiglu", "rmsnorm",
       "add_rmsnorm", "layernorm", "softmax", "rope", "embedding", "matmul", "attention",
       "kv_append", "paged_attention", "argmax", "sample")
assert OPS == _capi.OPS


def _method(fn):
    def method(self, *args, **kwargs):
        return fn(*args, context=self, **kwargs)
    method.__name__, method.__doc__ = fn.__name__, fn.__doc__
    return method


for _name in OPS:
    setattr(Context, _name, _method(globals()[_name]))
