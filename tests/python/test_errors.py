"""Bad calls raise gllmk.Error subclasses carrying gllmk_last_error(), the
message the C library wrote, and change nothing."""
import ctypes as C

import numpy as np
import pytest

import gllmk
from gllmk import _capi


class ForeignArray:
    """An array that speaks only DLPack, claiming a device of our choosing
    (for "a tensor of another device" without that device)."""

    def __init__(self, host, device_type=_capi.kDLCUDA, code=_capi.kDLFloat, bits=32):
        self.host = host
        self.shape = (C.c_int64 * host.ndim)(*host.shape)
        self.managed = _capi.DLManagedTensor()
        dl = self.managed.dl_tensor
        dl.data, dl.ndim = host.ctypes.data, host.ndim
        dl.device = _capi.DLDevice(device_type, 0)
        dl.dtype = _capi.DLDataType(code, bits, 1)
        dl.shape = self.shape
        self.device_type = device_type

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, stream=None):
        new = C.pythonapi.PyCapsule_New
        new.restype, new.argtypes = C.py_object, [C.c_void_p, C.c_char_p, C.c_void_p]
        return new(C.addressof(self.managed), b"dltensor", None)


def x32(shape=(4, 64)):
    return np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)


def test_wrong_dtype_is_gllmks_message(ctx):
    x, w = x32(), np.ones(64, np.float16)
    with pytest.raises(gllmk.InvalidArgumentError) as e:
        gllmk.rmsnorm(x, w, context=ctx)
    assert str(e.value) == "gllmk_rmsnorm: weight.dtype=f16 but out.dtype=f32 (one float dtype per call)"
    assert e.value.status == 1 and e.value.status_name == "GLLMK_ERR_INVALID_ARGUMENT"
    assert e.value.message == str(e.value)


def test_wrong_shape(ctx):
    with pytest.raises(gllmk.InvalidArgumentError, match=r"^gllmk_matmul: b.shape\[1\]=63 but a.shape\[-1\] \(K\)=64$"):
        gllmk.matmul(x32(), x32((8, 63)), context=ctx)


def test_non_contiguous_where_not_allowed(ctx):
    x = x32((4, 128))
    with pytest.raises(gllmk.InvalidArgumentError,
                       match=r"^gllmk_rmsnorm: x.strides\[1\]=2, the last dimension must have stride 1$"):
        gllmk.rmsnorm(x[:, ::2], np.ones(64, np.float32), context=ctx)
    q = x32((4, 2, 32)).reshape(4, 2, 32)
    positions = np.arange(8, dtype=np.int32)[::2]
    with pytest.raises(gllmk.InvalidArgumentError, match="^gllmk_rope: positions must be contiguous$"):
        gllmk.rope(q, positions, context=ctx)


def test_strided_views_that_gllmk_accepts(ctx):
    x = x32((6, 128))
    view = x[::2, :64]  # rows 2 apart, half of each: leading dims flatten into rows
    out = gllmk.silu(view, context=ctx)
    np.testing.assert_allclose(out, view / (1 + np.exp(-view)), rtol=1e-5, atol=1e-6)


def test_overlapping_output(ctx):
    x = x32((5, 64))
    out = x[1:]  # overlaps x[:-1] without being the same view
    before = x.copy()
    with pytest.raises(gllmk.InvalidArgumentError,
                       match=r"^gllmk_silu: output out overlaps x \(only an identical view is allowed\)$"):
        gllmk.silu(x[:-1], out=out, context=ctx)
    assert (x == before).all()  # nothing written


def test_in_place_is_the_same_view(ctx):
    x = x32()
    want = x / (1 + np.exp(-x.astype(np.float64)))
    gllmk.silu(x, out=x, context=ctx)
    np.testing.assert_allclose(x, want, rtol=1e-5, atol=1e-6)


def test_tensor_of_another_device(ctx):
    foreign = ForeignArray(x32())
    with pytest.raises(gllmk.Error) as e:
        gllmk.silu(foreign, out=np.empty((4, 64), np.float32), context=ctx)
    assert e.value.message.startswith("gllmk_buffer_wrap: ")
    if ctx.backend == "cpu":
        assert "cpu: only host memory can be wrapped" in e.value.message
    else:
        assert "cannot use external memory" in e.value.message


def test_dlpack_host_array_is_used_without_a_copy(cpu):
    x = x32()
    foreign = ForeignArray(x, device_type=_capi.kDLCPU)
    gllmk.silu(foreign, out=foreign, context=cpu)  # in place through DLPack
    np.testing.assert_allclose(x, x32() / (1 + np.exp(-x32())), rtol=1e-5)


def test_unsupported_dtypes():
    with pytest.raises(gllmk.UnsupportedError, match="numpy dtype <f8 is not f32, f16, bf16 or i32"):
        gllmk.silu(np.ones(4))
    with pytest.raises(gllmk.UnsupportedError, match=r"DLPack dtype \(code 2, 64 bits, 1 lanes\)"):
        gllmk.silu(ForeignArray(np.ones(4), device_type=_capi.kDLCPU, bits=64))
    with pytest.raises(TypeError, match="is not an array"):
        gllmk.silu([1.0, 2.0])


def test_read_only_output(cpu):
    out = np.zeros((4, 64), np.float32)
    out.flags.writeable = False
    with pytest.raises(gllmk.InvalidArgumentError, match="read-only"):
        gllmk.silu(x32(), out=out, context=cpu)


def test_scalars_are_checked_by_gllmk(ctx):
    with pytest.raises(gllmk.InvalidArgumentError, match=r"^gllmk_sample: top_p=1.5 is outside \(0, 1\]$"):
        gllmk.sample(x32(), top_p=1.5, context=ctx)
    with pytest.raises(gllmk.InvalidArgumentError, match="^gllmk_rmsnorm: eps=-1 is negative$"):
        gllmk.rmsnorm(x32(), np.ones(64, np.float32), eps=-1.0, context=ctx)


def test_device_tensor_of_another_context(ctx):
    other = gllmk.Context("cpu")
    t = other.tensor(x32())
    with pytest.raises(gllmk.InvalidArgumentError, match="belongs to another context"):
        gllmk.silu(t, out=ctx.empty((4, 64)), context=ctx)
    other.close()
    with pytest.raises(gllmk.Error, match="closed"):
        t.numpy()


def test_closed_context():
    c = gllmk.Context("cpu")
    c.close()
    with pytest.raises(gllmk.Error, match="closed"):
        gllmk.silu(x32(), context=c)


def test_context_create_error():
    with pytest.raises(gllmk.Error) as e:
        gllmk.Context("no-such-backend")
    assert "no-such-backend" in str(e.value)
