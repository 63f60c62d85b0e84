"""Arrays from other libraries as gllmk tensors, and gllmk's own.

describe() reads an array's address, dtype, shape and strides without a
copy: numpy.ndarray and torch.Tensor directly (fast paths), gllmk.Tensor and
gllmk.BF16 as themselves, anything else through its __dlpack__ capsule
(DLPack 0.6, kept alive for the call). Outputs made by an op come from the
library of its first array (numpy.empty, torch.empty, Context.empty).

gllmk.Tensor is a tensor in a gllmk buffer (device memory on GPU backends):
made by Context.empty / Context.tensor, or given out by the generator (its
logits). It speaks DLPack where the backend has addresses (cpu, cuda) and
copies out with .numpy() everywhere.

NumPy has no bfloat16: gllmk.BF16(u16) marks a uint16 array as holding
bfloat16 bits (bf16 ops on numpy arrays); gllmk.BF16.from_float(a) rounds.
"""
import ctypes as C
import sys

from . import _capi
from ._capi import DTYPE_ID, DTYPE_SIZE, MEMORY_CUDA_DEVICE, MEMORY_HOST, check

_NUMPY_DTYPES = {"float32": "f32", "float16": "f16", "int32": "i32"}
_numpy_dtypes = {}  # numpy dtype object -> name (dtype.name is slow)
_NUMPY_NAMES = {"f32": "float32", "f16": "float16", "i32": "int32", "bf16": "uint16"}
_DL_DTYPES = {(_capi.kDLFloat, 32): "f32", (_capi.kDLFloat, 16): "f16",
              (_capi.kDLBfloat, 16): "bf16", (_capi.kDLInt, 32): "i32"}


_torch_names = {}
_torch_types = {}


def _torch_dtypes(torch):
    if not _torch_names:
        _torch_names.update({torch.float32: "f32", torch.float16: "f16",
                             torch.bfloat16: "bf16", torch.int32: "i32"})
        _torch_types.update({v: k for k, v in _torch_names.items()})
    return _torch_names


class Desc:
    """One array of a call: where its element [0, ...] is (kind, device,
    ptr), dtype name, shape and strides (elements), the object it came from
    (kept alive for the call) and the library that made it ("numpy",
    "torch", "bf16", "gllmk", "dlpack"). key identifies the memory view."""
    __slots__ = ("kind", "device", "ptr", "dtype", "shape", "strides", "obj", "lib", "keep",
                 "key", "ctensor")

    def __init__(self, kind, device, ptr, dtype, shape, strides, obj, lib, keep=None):
        if not shape:  # 0-d becomes [1], as in gllmk_dlpack_import
            shape, strides = (1,), (1,)
        self.kind, self.device, self.ptr, self.dtype = kind, device, ptr, dtype
        self.shape, self.strides, self.obj, self.lib, self.keep = shape, strides, obj, lib, keep
        self.key = (kind, device, ptr, dtype, shape, strides)

    def span(self):
        """Bytes [lo, hi) the view touches."""
        low = high = 0
        for n, s in zip(self.shape, self.strides):
            if n > 0:
                if s < 0:
                    low += (n - 1) * s
                else:
                    high += (n - 1) * s
        size = DTYPE_SIZE[self.dtype]
        return self.ptr + low * size, self.ptr + (high + 1) * size

    def tensor(self, buffer, offset):
        t = _capi.Tensor(buffer, offset, DTYPE_ID[self.dtype], len(self.shape))
        t.shape[:len(self.shape)] = self.shape
        t.strides[:len(self.strides)] = self.strides
        return t


def _unsupported_dtype(name, what):
    return _capi.UnsupportedError(
        _capi.UNSUPPORTED, "gllmk: %s: %s is not f32, f16, bf16 or i32" % (name, what))


def _numpy(name, a, dtype=None, lib="numpy"):
    if dtype is None:
        dtype = _numpy_dtypes.get(a.dtype)
        if dtype is None:
            dtype = _NUMPY_DTYPES.get(a.dtype.name)
            if dtype is None or not a.dtype.isnative:
                raise _unsupported_dtype(name, "numpy dtype %s" % a.dtype.str)
            _numpy_dtypes[a.dtype] = dtype
    size = a.itemsize
    if any(s % size for s in a.strides):
        raise _capi.InvalidArgumentError(
            _capi.INVALID_ARGUMENT, "gllmk: %s: strides %s are not whole elements" % (name, a.strides))
    return Desc(MEMORY_HOST, 0, a.__array_interface__["data"][0], dtype, a.shape,
                tuple([s // size for s in a.strides]), a, lib)


def _torch(name, t, torch):
    dtype = _torch_names.get(t.dtype) or _torch_dtypes(torch).get(t.dtype)
    if dtype is None:
        raise _unsupported_dtype(name, "torch dtype %s" % t.dtype)
    if t.is_cuda:
        return Desc(MEMORY_CUDA_DEVICE, t.get_device(), t.data_ptr(), dtype, t.shape, t.stride(),
                    t, "torch")
    if t.device.type != "cpu":
        raise _capi.UnsupportedError(_capi.UNSUPPORTED,
                                     "gllmk: %s: torch device %s is not cpu or cuda" % (name, t.device))
    return Desc(MEMORY_HOST, 0, t.data_ptr(), dtype, t.shape, t.stride(), t, "torch")


_py = C.PyDLL(None)  # the Python C API, with argtypes of our own
_py.PyCapsule_GetPointer.restype = C.c_void_p
_py.PyCapsule_GetPointer.argtypes = [C.py_object, C.c_char_p]
_py.PyCapsule_IsValid.restype = C.c_int
_py.PyCapsule_IsValid.argtypes = [C.py_object, C.c_char_p]


def _dlpack(name, obj, stream):
    """Any object with __dlpack__ (the capsule is kept for the call)."""
    device_type = None
    if hasattr(obj, "__dlpack_device__"):
        device_type, _ = obj.__dlpack_device__()
    if device_type == _capi.kDLCUDA and stream:
        capsule = obj.__dlpack__(stream=stream)
    else:
        capsule = obj.__dlpack__()
    if not _py.PyCapsule_IsValid(capsule, b"dltensor"):
        raise _capi.InvalidArgumentError(_capi.INVALID_ARGUMENT,
                                         "gllmk: %s: __dlpack__ did not return a DLPack capsule" % name)
    dl = _capi.DLManagedTensor.from_address(_py.PyCapsule_GetPointer(capsule, b"dltensor")).dl_tensor
    dtype = _DL_DTYPES.get((dl.dtype.code, dl.dtype.bits)) if dl.dtype.lanes == 1 else None
    if dtype is None:
        raise _capi.UnsupportedError(
            _capi.UNSUPPORTED, "gllmk: %s: DLPack dtype (code %u, %u bits, %u lanes) is not f32, "
            "f16, bf16 or i32" % (name, dl.dtype.code, dl.dtype.bits, dl.dtype.lanes))
    devtype = dl.device.device_type
    if devtype in (_capi.kDLCPU, _capi.kDLCUDAHost):
        kind = MEMORY_HOST
    elif devtype in (_capi.kDLCUDA, _capi.kDLCUDAManaged):
        kind = MEMORY_CUDA_DEVICE
    else:
        raise _capi.UnsupportedError(
            _capi.UNSUPPORTED, "gllmk: %s: DLPack device type %d is not CPU or CUDA" % (name, devtype))
    shape = tuple(dl.shape[i] for i in range(dl.ndim))
    if dl.strides:
        strides = tuple(dl.strides[i] for i in range(dl.ndim))
    else:
        strides, step = [0] * dl.ndim, 1
        for i in reversed(range(dl.ndim)):
            strides[i], step = step, step * shape[i]
    return Desc(kind, dl.device.device_id, (dl.data or 0) + dl.byte_offset, dtype, shape,
                tuple(strides), obj, "dlpack", capsule)


def describe(obj, name, stream=None):
    """A Desc of obj (an array of any supported kind) for argument `name`."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return _torch(name, obj, torch)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        return _numpy(name, obj)
    if isinstance(obj, Tensor):
        t = obj._ctensor()
        d = Desc(None, -1, 0, obj.dtype, obj.shape, obj.strides, obj, "gllmk")
        d.key, d.ctensor = (None, t.buffer, t.offset, t.dtype, obj.shape, obj.strides), t
        return d
    if isinstance(obj, BF16):
        return _numpy(name, obj.bits, "bf16", "bf16")
    if hasattr(obj, "__dlpack__"):
        return _dlpack(name, obj, stream)
    raise TypeError("gllmk: %s: %s is not an array (numpy, torch, gllmk.Tensor or an object "
                    "with __dlpack__)" % (name, type(obj).__name__))


def check_writable(d, name):
    if d.lib in ("numpy", "bf16") and not d.obj.flags.writeable:  # obj: the ndarray
        raise _capi.InvalidArgumentError(_capi.INVALID_ARGUMENT,
                                         "gllmk: %s is a read-only numpy array" % name)


def empty_like(d, shape, dtype):
    """A new array of `shape` and `dtype` from the library `d` came from."""
    shape = tuple(shape)
    if d.lib == "torch":
        return sys.modules["torch"].empty(shape, dtype=_torch_types[dtype], device=d.obj.device)
    if d.lib == "gllmk":
        return Tensor.empty(d.obj.context, shape, dtype)
    if d.kind == MEMORY_HOST:
        import numpy as np
        a = np.empty(shape, _NUMPY_NAMES[dtype])
        return BF16(a) if dtype == "bf16" else a
    module = sys.modules.get(type(d.obj).__module__.split(".")[0])
    if dtype != "bf16" and hasattr(module, "empty"):
        return module.empty(shape, dtype=_NUMPY_NAMES[dtype])
    raise TypeError("gllmk: cannot make an output like a %s: pass out=" % type(d.obj).__name__)


# ------------------------------------------------------------------ BF16

class BF16:
    """bfloat16 data held as the bits in a numpy uint16 array (numpy has no
    bfloat16). Ops take it and give it back for bf16 work."""
    __slots__ = ("bits",)

    def __init__(self, bits):
        import numpy as np
        if not isinstance(bits, np.ndarray) or bits.dtype != np.uint16:
            raise TypeError("gllmk.BF16 holds a numpy uint16 array of bfloat16 bits")
        self.bits = bits

    @classmethod
    def from_float(cls, a):
        """Rounds (to nearest even) float values to bfloat16."""
        import numpy as np
        u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
        rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        rounded = np.where(np.isnan(a), 0x7FC0, rounded)
        return cls(rounded.astype(np.uint16))

    def float(self):
        """The values as float32 (exact)."""
        import numpy as np
        return (self.bits.astype(np.uint32) << 16).view(np.float32)

    @property
    def shape(self):
        return self.bits.shape

    def __getitem__(self, index):
        return BF16(self.bits[index])

    def __repr__(self):
        return "gllmk.BF16(%r)" % (self.float(),)


# ---------------------------------------------------------------- Tensor

class _Buffer:
    """A gllmk buffer owned by Python (freed when the last Tensor goes)."""

    def __init__(self, context, size):
        self.context = context
        self.handle = C.c_void_p()
        context._check_open()
        check(context._lib.gllmk_buffer_alloc(context._handle, size, C.byref(self.handle)))

    def __del__(self):
        if self.handle and self.context._handle is not None:
            self.context._lib.gllmk_buffer_free(self.handle)


_exports = {}  # DLManagedTensor address -> (Tensor kept alive, gllmk's deleter)


@_capi.DL_DELETER
def _export_deleter(address):
    tensor, deleter = _exports.pop(address)
    deleter(address)


_raw = C.PyDLL(None)  # the same calls on a raw PyObject* (inside a destructor)
_raw.PyCapsule_IsValid.restype = C.c_int
_raw.PyCapsule_IsValid.argtypes = [C.c_void_p, C.c_char_p]
_raw.PyCapsule_GetPointer.restype = C.c_void_p
_raw.PyCapsule_GetPointer.argtypes = [C.c_void_p, C.c_char_p]


@C.CFUNCTYPE(None, C.c_void_p)
def _capsule_destructor(capsule):
    # A capsule never consumed still owns its DLManagedTensor.
    if _raw.PyCapsule_IsValid(capsule, b"dltensor"):
        _export_deleter(_raw.PyCapsule_GetPointer(capsule, b"dltensor"))


_py.PyCapsule_New.restype = C.py_object
_py.PyCapsule_New.argtypes = [C.c_void_p, C.c_char_p, C.c_void_p]


class Tensor:
    """A view of a gllmk buffer: shape, strides (elements), dtype name
    ("f32", "f16", "bf16", "i32"), the Context it belongs to."""

    def __init__(self, context, owner, ctensor, valid=None):
        self.context = context
        self._owner = owner    # keeps the buffer alive (a _Buffer, a session)
        self._t = ctensor
        self._valid = valid    # None, or a callable saying why the view is stale
        self.dtype = _capi.DTYPES[ctensor.dtype]
        self.shape = tuple(ctensor.shape[:ctensor.ndim])
        self.strides = tuple(ctensor.strides[:ctensor.ndim])

    @classmethod
    def empty(cls, context, shape, dtype="f32"):
        shape = tuple(int(n) for n in shape) or (1,)
        if dtype not in DTYPE_ID:
            raise _unsupported_dtype("empty", repr(dtype))
        count = 1
        for n in shape:
            count *= n
        buffer = _Buffer(context, max(1, count) * DTYPE_SIZE[dtype])
        t = _capi.Tensor()
        check(context._lib.gllmk_tensor_make(buffer.handle, 0, DTYPE_ID[dtype], len(shape),
                                             (C.c_int64 * len(shape))(*shape), C.byref(t)))
        return cls(context, buffer, t)

    @classmethod
    def from_host(cls, context, array):
        import numpy as np
        if isinstance(array, BF16):
            host, dtype = np.ascontiguousarray(array.bits), "bf16"
        else:
            if not isinstance(array, np.ndarray) and hasattr(array, "numpy"):
                array = array.numpy()  # a CPU torch tensor (not bf16)
            host = np.ascontiguousarray(array)
            dtype = _NUMPY_DTYPES.get(host.dtype.name)
            if dtype is None:
                raise _unsupported_dtype("tensor", "numpy dtype %s" % host.dtype.str)
        t = cls.empty(context, host.shape, dtype)
        check(context._lib.gllmk_buffer_write(t._t.buffer, 0, host.ctypes.data, host.nbytes))
        return t

    def _ctensor(self):
        if self._valid is not None:
            stale = self._valid()
            if stale:
                raise _capi.InvalidArgumentError(_capi.INVALID_ARGUMENT, stale)
        self.context._check_open()
        return self._t

    @property
    def ndim(self):
        return len(self.shape)

    def numpy(self):
        """A host copy as a numpy array (bf16 as float32). Synchronizes."""
        import numpy as np
        t = self._ctensor()
        lib = self.context._lib
        span = 1 + sum((n - 1) * s for n, s in zip(self.shape, self.strides))
        host = np.empty(span, _NUMPY_NAMES[self.dtype])
        with self.context._lock:
            check(lib.gllmk_buffer_read(t.buffer, t.offset, host.ctypes.data, host.nbytes))
        size = host.itemsize
        view = np.lib.stride_tricks.as_strided(host, self.shape, [s * size for s in self.strides])
        out = np.array(view)
        return BF16(out).float() if self.dtype == "bf16" else out

    def __dlpack_device__(self):
        kind, address = C.c_uint32(), C.c_uint64()
        check(self.context._lib.gllmk_buffer_address(self._ctensor().buffer, C.byref(kind),
                                                     C.byref(address)))
        if kind.value == MEMORY_CUDA_DEVICE:
            return (_capi.kDLCUDA, self.context.device_index)
        return (_capi.kDLCPU, 0)

    def __dlpack__(self, stream=None, **_):
        """A DLPack view (gllmk_dlpack_export) that keeps this tensor's
        buffer alive until the consumer lets it go. Queued work is finished
        first (the consumer may be on another stream)."""
        t = self._ctensor()
        managed = C.POINTER(_capi.DLManagedTensor)()
        check(self.context._lib.gllmk_dlpack_export(C.byref(t), C.byref(managed)))
        self.context.synchronize()
        address = C.addressof(managed.contents)
        # A copy of gllmk's deleter: the field itself is about to change.
        deleter = _capi.DL_DELETER(C.cast(managed.contents.deleter, C.c_void_p).value)
        _exports[address] = (self, deleter)
        managed.contents.deleter = _export_deleter
        return _py.PyCapsule_New(address, b"dltensor", C.cast(_capsule_destructor, C.c_void_p))

    def __repr__(self):
        return "<gllmk.Tensor %s %s on %s>" % (self.dtype, list(self.shape), self.context.backend)
