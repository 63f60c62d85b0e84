"""Every op of gllmk_ops.def from Python, on numpy arrays (bf16 as
gllmk.BF16), on the cpu backend (zero copy) and vulkan (staged), against the
float64 references of refs.py with the conformance suite's tolerances."""
import math

import numpy as np
import pytest

import gllmk
import refs
from refs import FLOATS, assert_close, f64, rand, rounded

SHAPES = [(7,), (3, 33), (2, 3, 17), (4, 256)]


@pytest.fixture
def rng(request):
    return np.random.default_rng(abs(hash(request.node.name)) % 2 ** 32)


# ------------------------------------------------------------ copy, fill

@pytest.mark.parametrize("src_dtype", FLOATS)
@pytest.mark.parametrize("out_dtype", FLOATS)
def test_copy_casts(ctx, rng, src_dtype, out_dtype):
    src, x = rand(rng, (5, 9), src_dtype, -3, 3)
    out = gllmk.copy(src, dtype=out_dtype, context=ctx)
    want, _ = rounded(x, out_dtype)
    assert (f64(out) == f64(want)).all()


def test_copy_strided_source(ctx, rng):
    src, x = rand(rng, (6, 10), "f32")
    view = src.T[::2]  # [5, 6], strides (2, 10): any strides are allowed for copy's source
    out = gllmk.copy(view, context=ctx)
    assert out.flags.c_contiguous and (out == x.T[::2]).all()


@pytest.mark.parametrize("dtype", FLOATS + ("i32",))
def test_fill(ctx, dtype):
    out, _ = rounded(np.zeros((3, 5)), dtype)
    assert gllmk.fill(out, 2.75, context=ctx) is out
    assert (f64(out) == 2 if dtype == "i32" else f64(out) == 2.75).all()


# ---------------------------------------------------------- elementwise

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("op", ["add", "mul"])
def test_binary(ctx, rng, dtype, shape, op):
    a, av = rand(rng, shape, dtype, -4, 4)
    for b, bv in (rand(rng, shape, dtype, -4, 4), rand(rng, shape[-1:], dtype, -4, 4)):
        out = getattr(gllmk, op)(a, b, context=ctx)
        assert_close(out, av + bv if op == "add" else av * bv, dtype, what=op)


def test_binary_in_place(ctx, rng):
    a, av = rand(rng, (3, 33), "f32")
    b, bv = rand(rng, (3, 33), "f32")
    assert gllmk.add(a, b, out=a, context=ctx) is a
    assert_close(a, av + bv, "f32")


@pytest.mark.parametrize("dtype", FLOATS)
def test_mul_add(ctx, rng, dtype):
    a, av = rand(rng, (5, 40), dtype, -3, 3)
    b, bv = rand(rng, (40,), dtype, -3, 3)
    c, cv = rand(rng, (5, 40), dtype, -3, 3)
    out = gllmk.mul_add(a, b, c, context=ctx)
    assert_close(out, av * bv + cv, dtype, slack=np.abs(av * bv))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("act", ["silu", "gelu", "gelu_tanh"])
def test_activations(ctx, rng, dtype, act):
    x, xv = rand(rng, (3, 100), dtype, -6, 6)
    if act == "silu":
        out, ref, slack = gllmk.silu(x, context=ctx), refs.silu(xv), None
    else:
        approx = "tanh" if act == "gelu_tanh" else "none"
        out, ref = gllmk.gelu(x, approximate=approx, context=ctx), refs.gelu(xv, approx)
        slack = refs.gelu_tanh_slack(xv, ref, dtype) if approx == "tanh" else None
    assert_close(out, ref, dtype, slack=slack, what=act)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_add_gelu(ctx, rng, dtype, approximate):
    x, xv = rand(rng, (4, 64), dtype, -4, 4)
    b, bv = rand(rng, (64,), dtype, -2, 2)
    out = gllmk.add_gelu(x, b, approximate=approximate, context=ctx)
    ref = refs.gelu(xv + bv, approximate)
    slack = refs.gelu_tanh_slack(xv + bv, ref, dtype) if approximate == "tanh" else None
    assert_close(out, ref, dtype, slack=slack)


@pytest.mark.parametrize("dtype", FLOATS)
def test_swiglu_on_column_slices(ctx, rng, dtype):
    inter = 48
    gate_up, v = rand(rng, (6, 2 * inter), dtype, -8, 8)
    gate, up = gate_up[:, :inter], gate_up[:, inter:]  # strided views of one array
    out = gllmk.swiglu(gate, up, context=ctx)
    assert_close(out, refs.silu(v[:, :inter]) * v[:, inter:], dtype)


# ---------------------------------------------------------------- norms

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_rmsnorm(ctx, rng, dtype, shape):
    x, xv = rand(rng, shape, dtype, -2, 2)
    w, wv = rand(rng, shape[-1:], dtype, 0.5, 1.5)
    assert_close(gllmk.rmsnorm(x, w, eps=1e-5, context=ctx), refs.rmsnorm(xv, wv, 1e-5), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_add_rmsnorm(ctx, rng, dtype):
    residual, rv = rand(rng, (5, 100), dtype, -2, 2)
    x, xv = rand(rng, (5, 100), dtype, -2, 2)
    w, wv = rand(rng, (100,), dtype, 0.5, 1.5)
    out = gllmk.add_rmsnorm(residual, x, w, eps=1e-5, context=ctx)
    _, stored = rounded(rv + xv, dtype)  # the residual as stored, then its norm
    assert_close(residual, rv + xv, dtype, what="residual")
    assert_close(out, refs.rmsnorm(stored, wv, 1e-5), dtype, what="out")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("with_bias", [False, True])
def test_layernorm(ctx, rng, dtype, with_bias):
    x, xv = rand(rng, (3, 33), dtype, -2, 2)
    w, wv = rand(rng, (33,), dtype, 0.5, 1.5)
    b, bv = rand(rng, (33,), dtype) if with_bias else (None, None)
    out = gllmk.layernorm(x, w, b, eps=1e-5, context=ctx)
    assert_close(out, refs.layernorm(xv, wv, bv, 1e-5), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax(ctx, rng, dtype):
    x, xv = rand(rng, (4, 1000), dtype, -5, 5)
    assert_close(gllmk.softmax(x, scale=0.7, context=ctx), refs.softmax(xv, 0.7), dtype)


# -------------------------------------------------------- rope, embedding

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("style", ["neox", "gptj"])
@pytest.mark.parametrize("rotary_dim", [64, 32])
def test_rope(ctx, rng, dtype, style, rotary_dim):
    x, xv = rand(rng, (5, 3, 64), dtype)
    positions = np.array([0, 1, 7, 100, 4095], np.int32)
    out = gllmk.rope(x, positions, theta=10000.0, rotary_dim=rotary_dim, style=style, context=ctx)
    assert_close(out, refs.rope(xv, positions, 10000.0, rotary_dim, style), dtype)


def test_rope_inv_freq_in_place(ctx, rng):
    x, xv = rand(rng, (4, 2, 32), "f32")
    positions = np.array([3, 9, 1000, 70000], np.int32)
    inv_freq = (0.5 ** np.arange(16)).astype(np.float32)
    assert gllmk.rope(x, positions, theta=0.0, inv_freq=inv_freq, out=x, context=ctx) is x
    assert_close(x, refs.rope(xv, positions, None, 32, "neox", inv_freq.astype(np.float64)), "f32")


@pytest.mark.parametrize("dtype", FLOATS)
def test_embedding(ctx, rng, dtype):
    table, tv = rand(rng, (50, 24), dtype)
    ids = np.array([[0, 49, 7], [7, 3, 1]], np.int32)
    out = gllmk.embedding(ids, table, context=ctx)
    assert f64(out).shape == (2, 3, 24) and (f64(out) == tv[ids]).all()


def test_embedding_out_of_range_raises_at_the_call(ctx, rng):
    table, _ = rand(rng, (10, 8), "f32")
    with pytest.raises(gllmk.OutOfRangeError, match="embedding"):
        gllmk.embedding(np.array([1, 10], np.int32), table, context=ctx)
    gllmk.embedding(np.array([1, 2], np.int32), table, context=ctx)  # the flag was cleared


# --------------------------------------------------------------- matmul

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("layout", ["nk", "kn"])
def test_matmul(ctx, rng, dtype, layout):
    a, av = rand(rng, (2, 5, 64), dtype)
    b, bv = rand(rng, (48, 64) if layout == "nk" else (64, 48), dtype)
    bias, biasv = rand(rng, (48,), dtype)
    out = gllmk.matmul(a, b, bias, layout=layout, context=ctx)
    ref = av @ (bv.T if layout == "nk" else bv) + biasv
    assert_close(out, ref, dtype)


def test_matmul_alpha_beta(ctx, rng):
    a, av = rand(rng, (7, 33), "f32")
    b, bv = rand(rng, (33, 20), "f32")
    out, ov = rand(rng, (7, 20), "f32")
    gllmk.matmul(a, b, layout="kn", alpha=0.5, beta=2.0, out=out, context=ctx)
    assert_close(out, 0.5 * av @ bv + 2.0 * ov, "f32")


def test_matmul_rms_eps(cpu, rng):
    a, av = rand(rng, (3, 40), "f32")
    w, wv = rand(rng, (24, 40), "f32")
    normed = av / np.sqrt(np.mean(av * av, axis=-1, keepdims=True) + 1e-5)
    assert_close(gllmk.matmul(a, w, rms_eps=1e-5, context=cpu), normed @ wv.T, "f32")


@pytest.mark.parametrize("rows", [1, 3])
def test_matmul_rope(cpu, rng, rows):
    a, av = rand(rng, (rows, 40), "f32")
    w, wv = rand(rng, (48, 40), "f32")
    positions = np.array([5000, 0, 17][:rows], np.int32)
    rope = {"positions": positions, "head_dim": 16, "rotary_dim": 12, "columns": 32, "theta": 500.0}
    ref = av @ wv.T
    ref[:, :32] = refs.rope(ref[:, :32].reshape(rows, 2, 16), positions, 500.0, 12,
                            "gptj").reshape(rows, 32)
    assert_close(gllmk.matmul(a, w, rope=rope, context=cpu), ref, "f32")


@pytest.mark.parametrize("rows", [1, 3])
def test_matmul_glu(cpu, rng, rows):
    a, av = rand(rng, (rows, 40), "f32")
    w, wv = rand(rng, (48, 40), "f32")
    bias, biasv = rand(rng, (48,), "f32")
    product = av @ wv.T + biasv
    gate, up = product[:, :24], product[:, 24:]
    out = gllmk.matmul(a, w, bias, glu="swiglu", context=cpu)
    assert_close(out, refs.silu(gate) * up, "f32")


def test_matmul_kv(cpu, rng):
    a, av = rand(rng, (2, 40), "f32")
    w, wv = rand(rng, (40, 40), "f32")  # q (8), k (16: 2 heads of 8), v (16)
    k_cache, kv_ = rand(rng, (3, 4, 2, 8), "f32")
    v_cache, vv = rand(rng, (3, 4, 2, 8), "f32")
    slots = np.array([9, -1], np.int32)
    out = gllmk.matmul(a, w, kv={"k_cache": k_cache, "v_cache": v_cache, "slots": slots,
                                 "first": 8}, context=cpu)
    assert_close(out, av @ wv.T, "f32")
    kv_.reshape(12, 16)[9] = out[0, 8:24]
    vv.reshape(12, 16)[9] = out[0, 24:40]
    assert_close(k_cache, kv_, "f32")
    assert_close(v_cache, vv, "f32")


def test_matmul_kv_refuses_overlaps(cpu, rng):
    w, _ = rand(rng, (40, 40), "f32")
    k_cache, _ = rand(rng, (3, 4, 2, 8), "f32")
    v_cache, _ = rand(rng, (3, 4, 2, 8), "f32")
    positions = np.zeros(2, np.int32)
    cases = {"a": (k_cache.reshape(-1)[:80].reshape(2, 40), np.array([1, 2], np.int32)),
             "kv_slots": (rand(rng, (2, 40), "f32")[0], v_cache.reshape(-1)[:2].view(np.int32))}
    for name, (a, slots) in cases.items():
        kv = {"k_cache": k_cache, "v_cache": v_cache, "slots": slots, "first": 8}
        with pytest.raises(gllmk.InvalidArgumentError, match=name):
            gllmk.matmul(a, w, kv=kv, context=cpu)
    rope = {"positions": k_cache.reshape(-1)[:2].view(np.int32), "head_dim": 8, "columns": 24}
    kv = {"k_cache": k_cache, "v_cache": v_cache, "slots": np.array([1, 2], np.int32), "first": 8}
    with pytest.raises(gllmk.InvalidArgumentError, match="rope_positions"):
        gllmk.matmul(rand(rng, (2, 40), "f32")[0], w, rope=rope, kv=kv, context=cpu)


def test_matmul_gemv_f32(ctx, rng):
    a, av = rand(rng, (1, 300), "f32")
    w, wv = rand(rng, (129, 300), "f32")
    assert_close(gllmk.matmul(a, w, context=ctx), av @ wv.T, "f32")


# ------------------------------------------------------------ attention

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("causal", [False, True])
def test_attention(ctx, rng, dtype, causal):
    q, qv = rand(rng, (2, 5, 4, 32), dtype)
    k, kv = rand(rng, (2, 9, 2, 32), dtype)
    v, vv = rand(rng, (2, 9, 2, 32), dtype)
    kv_lens = np.array([9, 6], np.int32)
    out, lse = gllmk.attention(q, k, v, causal=causal, kv_lens=kv_lens, return_lse=True,
                               context=ctx)
    ref, ref_lse = refs.attention(qv, kv, vv, 1 / math.sqrt(32), causal, kv_lens)
    assert_close(out, ref, dtype, what="out")
    assert lse.dtype == np.float32 and lse.shape == (2, 4, 5)
    assert_close(lse, ref_lse, dtype, what="lse")


@pytest.mark.parametrize("dtype", FLOATS)
def test_kv_append_and_paged_attention(ctx, rng, dtype):
    blocks, block_size, hkv, hq, d = 6, 4, 2, 4, 32
    k_cache, _ = rounded(np.zeros((blocks, block_size, hkv, d)), dtype)
    v_cache, _ = rounded(np.zeros((blocks, block_size, hkv, d)), dtype)
    lengths = [7, 3]  # two sequences: blocks [2, 5] and [0]
    table = np.array([[2, 5], [0, -1]], np.int32)
    keys, kvals = rand(rng, (sum(lengths), hkv, d), dtype)
    vals, vvals = rand(rng, (sum(lengths), hkv, d), dtype)
    slots = np.array([table[0, i // block_size] * block_size + i % block_size for i in range(7)]
                     + [table[1, 0] * block_size + i for i in range(3)], np.int32)
    gllmk.kv_append(k_cache, v_cache, keys, vals, slots, context=ctx)
    assert (f64(k_cache).reshape(-1, hkv, d)[slots] == kvals).all()
    # decode of the first sequence's last token and prefill of the second's 3
    q, qv = rand(rng, (4, hq, d), dtype)
    q_starts = np.array([0, 1, 4], np.int32)
    seq_lens = np.array(lengths, np.int32)
    out = gllmk.paged_attention(q, k_cache, v_cache, table, q_starts, seq_lens, context=ctx)
    scale = 1 / math.sqrt(d)
    ref0, _ = refs.attention(qv[None, 0:1], kvals[None, 0:7], vvals[None, 0:7], scale, True)
    ref1, _ = refs.attention(qv[None, 1:4], kvals[None, 7:], vvals[None, 7:], scale, True)
    assert_close(out, np.concatenate([ref0[0], ref1[0]]), dtype)


# ------------------------------------------------------- argmax, sample

@pytest.mark.parametrize("dtype", FLOATS)
def test_argmax(ctx, rng, dtype):
    logits, lv = rand(rng, (5, 1000), dtype, -10, 10)
    out = gllmk.argmax(logits, context=ctx)
    assert out.dtype == np.int32 and (out == lv.argmax(-1)).all()


@pytest.mark.parametrize("params", [dict(temperature=0.8), dict(temperature=1.0, top_k=20),
                                    dict(temperature=1.2, top_p=0.9), dict(temperature=1.0, min_p=0.05),
                                    dict(temperature=0.0)])
def test_sample(ctx, rng, params):
    logits, lv = rand(rng, (16, 300), "f32", -4, 4)
    seed, offset = 1234, 7
    out = gllmk.sample(logits, seed=seed, offset=offset, context=ctx, **params)
    full = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)
    full.update(params)
    mismatches = 0
    for row in range(16):
        want, margin = refs.sample_row(lv[row], seed=seed, offset=offset, row=row, **full)
        # GPU backends follow the steps in f32: a draw on a boundary may differ there
        if out[row] != want:
            assert ctx.backend != "cpu" and margin < 1e-4, (row, out[row], want, margin)
            mismatches += 1
    assert mismatches <= 1
    again = gllmk.sample(logits, seed=seed, offset=offset, context=ctx, **params)
    assert (again == out).all()
