#!/usr/bin/env python3
"""gllmk on PyTorch CUDA tensors (the GPU machine; skipped elsewhere with
"skipped: <reason>"): every op against the float64 references, zero copy and
in place, errors, ordering on a NON-default stream without synchronizing,
DLPack-only objects, the generator and traces on cuda, and the per-call
overhead from Python (<= 10 us above the kernel's device time).

Runs under pytest (python3 -m pytest tests/python) or as a plain script
where pytest is missing: python3 tests/python/test_torch.py [LIBDIR]
"""
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
if __name__ == "__main__" and len(sys.argv) > 1:
    os.environ["GLLMK_LIBRARY_DIR"] = sys.argv[1]
os.environ.setdefault("GLLMK_LIBRARY_DIR", os.path.join(REPO, "build", "lib"))
for path in (os.path.join(REPO, "tools", "python"), HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

import numpy as np  # noqa: E402

import gllmk  # noqa: E402
import refs  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    torch, _why = None, "PyTorch is not installed (%s)" % e
else:
    _why = None if torch.cuda.is_available() else "PyTorch has no CUDA device"


class Skipped(Exception):
    pass


def skip(reason):
    if "pytest" in sys.modules:
        import pytest
        pytest.skip("skipped: " + reason)
    raise Skipped(reason)


def need_cuda():
    if _why:
        skip(_why)
    try:
        gllmk.Context("cuda").close()
    except gllmk.Error as e:
        skip("gllmk has no cuda context: %s" % e)


TORCH = {}


def tdtype(name):
    if not TORCH:
        TORCH.update(f32=torch.float32, f16=torch.float16, bf16=torch.bfloat16, i32=torch.int32)
    return TORCH[name]


def rand(shape, dtype, lo=-1.0, hi=1.0, gen=np.random.default_rng(5)):
    """A CUDA tensor of `dtype` and its values as float64 (numpy)."""
    values = gen.uniform(lo, hi, size=shape)
    t = torch.tensor(values, dtype=torch.float64).to(tdtype(dtype)).cuda()
    return t, t.double().cpu().numpy()


def close(out, ref, dtype, what, slack=None):
    assert isinstance(out, torch.Tensor) and out.is_cuda, "%s: not a CUDA tensor" % what
    refs.assert_close(out.double().cpu().numpy(), ref, dtype, slack=slack, what=what)


# ------------------------------------------------------------------ ops

def test_every_op_on_cuda_tensors():
    need_cuda()
    for dt in refs.FLOATS:
        x, xv = rand((6, 256), dt, -3, 3)
        y, yv = rand((6, 256), dt, -3, 3)
        row, rowv = rand((256,), dt, 0.5, 1.5)
        close(gllmk.copy(x, dtype="f32"), xv, "f32", "copy")
        close(gllmk.fill(torch.empty_like(x), 1.5), np.full(xv.shape, 1.5), dt, "fill")
        close(gllmk.add(x, y), xv + yv, dt, "add")
        close(gllmk.mul(x, row), xv * rowv, dt, "mul")
        close(gllmk.mul_add(x, row, y), xv * rowv + yv, dt, "mul_add", slack=np.abs(xv * rowv))
        close(gllmk.silu(x), refs.silu(xv), dt, "silu")
        close(gllmk.gelu(x), refs.gelu(xv), dt, "gelu")
        close(gllmk.add_gelu(x, row, approximate="tanh"), refs.gelu(xv + rowv, "tanh"), dt,
              "add_gelu", slack=refs.gelu_tanh_slack(xv + rowv, refs.gelu(xv + rowv, "tanh"), dt))
        gu, guv = rand((6, 512), dt, -8, 8)
        close(gllmk.swiglu(gu[:, :256], gu[:, 256:]), refs.silu(guv[:, :256]) * guv[:, 256:], dt,
              "swiglu on column views")
        close(gllmk.rmsnorm(x, row), refs.rmsnorm(xv, rowv, 1e-5), dt, "rmsnorm")
        residual, rv = rand((6, 256), dt)
        out = gllmk.add_rmsnorm(residual, x, row)
        stored = (torch.tensor(rv + xv).to(tdtype(dt))).double().numpy()
        close(residual, rv + xv, dt, "add_rmsnorm residual")
        close(out, refs.rmsnorm(stored, rowv, 1e-5), dt, "add_rmsnorm out")
        close(gllmk.layernorm(x, row, row), refs.layernorm(xv, rowv, rowv, 1e-5), dt, "layernorm")
        close(gllmk.softmax(x, scale=0.5), refs.softmax(xv, 0.5), dt, "softmax")
        q, qv = rand((5, 4, 64), dt)
        pos = torch.tensor([0, 3, 9, 100, 5000], dtype=torch.int32, device="cuda")
        close(gllmk.rope(q, pos, theta=500000.0, style="gptj"),
              refs.rope(qv, pos.cpu().numpy(), 500000.0, 64, "gptj"), dt, "rope")
        table, tv = rand((100, 64), dt)
        ids = torch.tensor([[1, 99], [5, 5]], dtype=torch.int32, device="cuda")
        close(gllmk.embedding(ids, table), tv[ids.cpu().numpy()], dt, "embedding")
        a, av = rand((3, 7, 96), dt)
        w, wv = rand((40, 96), dt)
        close(gllmk.matmul(a, w, row[:40]), av @ wv.T + rowv[:40], dt, "matmul")
        qa, qav = rand((2, 9, 8, 64), dt)
        ka, kav = rand((2, 13, 2, 64), dt)
        va, vav = rand((2, 13, 2, 64), dt)
        out, lse = gllmk.attention(qa, ka, va, causal=True, return_lse=True)
        ref, ref_lse = refs.attention(qav, kav, vav, 1 / 8, True)
        close(out, ref, dt, "attention")
        close(lse, ref_lse, dt, "attention lse")
        kc = torch.zeros((4, 16, 2, 64), dtype=tdtype(dt), device="cuda")
        vc = torch.zeros_like(kc)
        k, kv = rand((20, 2, 64), dt)
        v, vv = rand((20, 2, 64), dt)
        slots = torch.tensor([16 + i for i in range(16)] + [48 + i for i in range(4)],
                             dtype=torch.int32, device="cuda")
        gllmk.kv_append(kc, vc, k, v, slots)
        qd, qdv = rand((1, 8, 64), dt)
        table_ids = torch.tensor([[1, 3]], dtype=torch.int32, device="cuda")
        starts = torch.tensor([0, 1], dtype=torch.int32, device="cuda")
        lens = torch.tensor([20], dtype=torch.int32, device="cuda")
        ref, _ = refs.attention(qdv[None], kv[None], vv[None], 1 / 8, True)
        close(gllmk.paged_attention(qd, kc, vc, table_ids, starts, lens), ref[0], dt,
              "kv_append + paged_attention")
        logits, lv = rand((4, 3000), dt, -5, 5)
        got = gllmk.argmax(logits)
        assert got.dtype == torch.int32 and (got.cpu().numpy() == lv.argmax(-1)).all(), "argmax"
        s1 = gllmk.sample(logits, temperature=0.9, top_k=40, seed=3)
        assert (gllmk.sample(logits, temperature=0.9, top_k=40, seed=3) == s1).all(), "sample"


def test_zero_copy_and_in_place():
    need_cuda()
    x, xv = rand((64, 1024), "bf16")
    ptr = x.data_ptr()
    assert gllmk.silu(x, out=x) is x and x.data_ptr() == ptr
    close(x, refs.silu(xv), "bf16", "silu in place")
    strided = torch.randn(32, 2048, device="cuda")[:, ::1][:, :1024]  # row stride 2048
    close(gllmk.rmsnorm(strided, torch.ones(1024, device="cuda")),
          refs.rmsnorm(strided.double().cpu().numpy(), 1.0, 1e-5), "f32", "strided rows")


def test_errors_on_cuda():
    need_cuda()
    x = torch.randn(4, 64, device="cuda")
    with_message(lambda: gllmk.add(x, torch.randn(4, 64)), "gllmk_buffer_wrap: cuda: only CUDA device memory can be wrapped")
    with_message(lambda: gllmk.rmsnorm(x, torch.ones(64, device="cuda", dtype=torch.float16)),
                 "gllmk_rmsnorm: weight.dtype=f16 but out.dtype=f32 (one float dtype per call)")
    with_message(lambda: gllmk.rmsnorm(torch.randn(4, 128, device="cuda")[:, ::2],
                                       torch.ones(64, device="cuda")),
                 "gllmk_rmsnorm: x.strides[1]=2, the last dimension must have stride 1")
    with_message(lambda: gllmk.silu(x, context=gllmk.default_context()),
                 "gllmk_buffer_wrap: cpu: only host memory can be wrapped")
    with_message(lambda: gllmk.silu(torch.randn(4, device="cuda", dtype=torch.float64)),
                 "gllmk: x: torch dtype torch.float64 is not f32, f16, bf16 or i32")


def with_message(fn, message):
    try:
        fn()
    except gllmk.Error as e:
        assert str(e) == message, "got %r, expected %r" % (str(e), message)
    else:
        raise AssertionError("no error, expected %r" % message)


# ------------------------------------------------------------- streams

def test_ordering_on_a_non_default_stream():
    """x is written by a long torch matmul on stream s, gllmk reads x on s,
    torch reads gllmk's output on s: no synchronize in between. A gllmk
    that ignored the stream would read x before the matmul wrote it."""
    need_cuda()
    n = 8192
    a = torch.randn(n, n, device="cuda") / math.sqrt(n)
    b = torch.randn(n, n, device="cuda")
    for explicit in (False, True):
        x = torch.zeros(n, n, device="cuda")
        y = torch.full((n, n), float("nan"), device="cuda")
        torch.cuda.synchronize()
        s = torch.cuda.Stream()
        ctx = gllmk.Context("cuda", stream=s) if explicit else None
        with torch.cuda.stream(s):
            torch.matmul(a, b, out=x)            # tens of milliseconds of work
            gllmk.silu(x, out=y, context=ctx)    # must wait for it: same stream
            seen = y[:64, :64].clone()           # must see gllmk's result
        s.synchronize()
        want = F.silu(x[:64, :64])
        err = (seen - want).abs().max().item()
        assert err < 1e-4, "%s context: gllmk did not order with stream s (max error %g)" % (
            "explicit" if explicit else "default", err)
        if ctx is not None:
            ctx.close()


def test_default_context_follows_the_current_stream():
    need_cuda()
    x = torch.randn(16, device="cuda")
    s = torch.cuda.Stream()
    default = gllmk.context_for(gllmk.tensors.describe(x, "x"))
    assert default.stream == (torch.cuda.current_stream().cuda_stream or 1)  # 1: the legacy stream
    with torch.cuda.stream(s):
        assert gllmk.context_for(gllmk.tensors.describe(x, "x")).stream == s.cuda_stream
        gllmk.silu(x)


class DLPackOnly:
    """Only __dlpack__ / __dlpack_device__ (like a foreign CUDA array)."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def test_dlpack_only_objects():
    need_cuda()
    x, xv = rand((8, 128), "f32")
    out = torch.empty_like(x)
    gllmk.silu(DLPackOnly(x), out=DLPackOnly(out))
    close(out, refs.silu(xv), "f32", "silu through __dlpack__")


# ------------------------------------------------------------ generator

def test_model_and_trace_on_cuda(tmp_path=None):
    need_cuda()
    ctx = gllmk.Context("cuda")
    model = gllmk.Model("tiny", context=ctx, dtype="f32")
    path = os.path.join(str(tmp_path) if tmp_path else "/tmp", "gllmk-torch-trace.json")
    with gllmk.trace(path) as t:
        tokens = list(model.generate([1, 2, 3], max_new=8))
    assert len(tokens) == 8
    assert t.events and all(e["args"]["host_timed"] == 0 and e["dur"] > 0 for e in t.events)
    with model.session(cache_tokens=64) as s:
        seq = s.add()
        got, logits = s.forward({seq: [1, 2, 3]}, logits=True)
        view = torch.from_dlpack(logits)  # the device memory itself
        assert view.is_cuda and view.shape == (1, model.vocab)
        assert int(view.argmax()) == got[0] == tokens[0]


# ------------------------------------------------------------- overhead

def test_per_call_overhead():
    """N calls of a tiny op from Python (wall, one synchronize at the end)
    against the op's device time (gllmk's timing callback): <= 10 us apart."""
    need_cuda()
    x = torch.randn(4096, device="cuda")
    y = torch.empty_like(x)
    ctx = gllmk.context_for(gllmk.tensors.describe(x, "x"))
    n = 5000
    for _ in range(200):
        gllmk.silu(x, out=y)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            gllmk.silu(x, out=y)
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - start) / n)
    durations = []
    ctx._set_timing(lambda r: durations.append((r.end_ns - r.start_ns) / 1e9))
    for _ in range(1000):
        gllmk.silu(x, out=y)
    ctx.synchronize()
    ctx._set_timing(None)
    kernel = float(np.median(durations))
    start = time.perf_counter()
    for _ in range(n):
        F.silu(x)
    torch.cuda.synchronize()
    torch_call = (time.perf_counter() - start) / n
    print("per call: gllmk.silu %.2f us wall, kernel %.2f us (device), overhead %.2f us; "
          "torch F.silu %.2f us" % (best * 1e6, kernel * 1e6, (best - kernel) * 1e6,
                                    torch_call * 1e6))
    assert best - kernel <= 10e-6, "overhead %.2f us above the kernel" % ((best - kernel) * 1e6)


# ---------------------------------------------------------------- script

def main():
    failed = 0
    for name, fn in sorted(globals().items()):
        if not name.startswith("test_") or not callable(fn):
            continue
        try:
            fn()
        except Skipped as e:
            print("skipped: %s: %s" % (name, e))
        except Exception as e:  # noqa: BLE001 - report every test
            failed += 1
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
        else:
            print("ok   %s" % name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
