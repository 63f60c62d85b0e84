"""No leaks over 10,000 calls: the process's heap (glibc mallinfo2, which
counts gllmk's own allocations) and resident size stay flat, and the
bindings' caches stay bounded. Each loop first runs 1,000 calls to warm up
(caches fill, allocators settle), then 10,000 more are measured."""
import ctypes as C
import gc

import numpy as np
import pytest

import gllmk
from gllmk import context as gllmk_context
from gllmk import tensors as gllmk_tensors

CALLS = 10_000
HEAP_LIMIT = 256 * 1024      # bytes the heap may grow over CALLS calls (< 26 bytes a call)
RSS_LIMIT = 4 * 1024 * 1024  # resident growth allowed (allocator noise)


class Mallinfo2(C.Structure):
    _fields_ = [(name, C.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                "usmblks", "fsmblks", "uordblks", "fordblks",
                                                "keepcost")]


_libc = C.CDLL(None)
_mallinfo2 = getattr(_libc, "mallinfo2", None)
if _mallinfo2 is not None:
    _mallinfo2.restype = Mallinfo2


def heap_bytes():
    if _mallinfo2 is None:
        return 0
    info = _mallinfo2()
    return info.uordblks + info.hblkhd


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def growth(fn):
    for _ in range(1000):
        fn()
    gc.collect()
    heap, rss = heap_bytes(), rss_bytes()
    for _ in range(CALLS):
        fn()
    gc.collect()
    return heap_bytes() - heap, rss_bytes() - rss


def assert_flat(fn, what):
    heap, rss = growth(fn)
    assert heap < HEAP_LIMIT and rss < RSS_LIMIT, \
        "%s: heap +%d bytes, resident +%d bytes over %d calls" % (what, heap, rss, CALLS)


def test_zero_copy_calls_do_not_leak(cpu):
    a = np.ones((4, 64), np.float32)
    b = np.ones(64, np.float32)
    out = np.empty_like(a)
    assert_flat(lambda: gllmk.add(a, b, out=out, context=cpu), "add, out=")
    assert_flat(lambda: gllmk.add(a, b, context=cpu), "add, new outputs")
    # fresh arrays every call: wraps come and go through the bounded cache
    assert_flat(lambda: gllmk.silu(np.ones((3, 50), np.float32), context=cpu), "silu, fresh arrays")
    assert len(cpu._wraps) <= gllmk_context._WRAP_CACHE_MAX
    assert len(cpu._plans) <= gllmk_context._PLAN_CACHE_MAX


def test_staged_calls_do_not_leak(ctx):
    if ctx.backend == "cpu":
        pytest.skip("skipped: cpu wraps host memory (no staging)")
    a = np.ones((4, 64), np.float32)
    assert_flat(lambda: gllmk.rmsnorm(a, a[0], context=ctx), "rmsnorm, staged")


def test_failed_calls_do_not_leak(ctx):
    a = np.ones((4, 64), np.float32)
    bad = np.ones(63, np.float32)

    def fail():
        try:
            gllmk.add(a, bad, context=ctx)
        except gllmk.InvalidArgumentError:
            pass
        else:
            raise AssertionError("no error")
    assert_flat(fail, "failing add")


def test_device_tensors_and_dlpack_do_not_leak(cpu):
    t = cpu.tensor(np.ones((8, 8), np.float32))

    def roundtrip():
        view = np.from_dlpack(t)  # gllmk_dlpack_export, then numpy's deleter
        gllmk.silu(t, out=cpu.empty((8, 8)))
        del view
    assert_flat(roundtrip, "dlpack export + device tensors")
    assert not gllmk_tensors._exports


def test_sessions_and_contexts_do_not_leak():
    """Slower objects, so fewer rounds: 1,000 sessions, 200 contexts."""
    model = gllmk.Model("tiny", context=gllmk.Context("cpu"), dtype="f32")

    def session():
        with model.session(cache_tokens=64) as s:
            s.forward({s.add(): [1, 2, 3]})

    def context():
        with gllmk.Context("cpu") as c:
            gllmk.silu(np.ones(8, np.float32), context=c)
    for fn, warm, rounds in ((session, 100, 1000), (context, 20, 200)):
        for _ in range(warm):
            fn()
        gc.collect()
        heap, rss = heap_bytes(), rss_bytes()
        for _ in range(rounds):
            fn()
        gc.collect()
        assert heap_bytes() - heap < HEAP_LIMIT and rss_bytes() - rss < RSS_LIMIT, fn.__name__
