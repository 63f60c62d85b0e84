"""ctypes declarations of libgllmk.so.0 and libgllmk-model.so.0.

Every struct mirrors its C declaration field for field (gllmk.h,
gllmk_model.h, dlpack.h 0.6); tests/python/test_capi.py compiles a C
program that prints sizeof and offsetof of each and compares them.

Finding the libraries: gllmk.load(libdir), else $GLLMK_LIBRARY_DIR (read
here, never by the C library), else the dynamic loader's own search
(ld.so.cache, LD_LIBRARY_PATH: an installed libgllmk.so.0), else
ctypes.util.find_library, else the LIBDIR that `make install-python` wrote
into gllmk/_paths.py. The core finds its plugins next to itself.
"""
import ctypes as C
import ctypes.util
import os

MAX_DIMS = 8

# gllmk_ops.def, in order (checked against gllmk_op_name at load).
OPS = ("copy", "fill", "add", "mul", "mul_add", "silu", "gelu", "add_gelu", "swiglu",
       "rmsnorm", "add_rmsnorm", "layernorm", "softmax", "rope", "embedding", "matmul",
       "attention", "kv_append", "paged_attention", "argmax", "sample")
OP_ID = {name: i for i, name in enumerate(OPS)}

DTYPES = ("f32", "f16", "bf16", "i32")  # gllmk_dtype values 0..3
DTYPE_ID = {name: i for i, name in enumerate(DTYPES)}
DTYPE_SIZE = {"f32": 4, "f16": 2, "bf16": 2, "i32": 4}

STATUS = ("GLLMK_OK", "GLLMK_ERR_INVALID_ARGUMENT", "GLLMK_ERR_UNSUPPORTED",
          "GLLMK_ERR_OUT_OF_MEMORY", "GLLMK_ERR_OUT_OF_RANGE", "GLLMK_ERR_NO_BACKEND",
          "GLLMK_ERR_BACKEND", "GLLMK_ERR_OVERFLOW", "GLLMK_ERR_INTERNAL")
OK, INVALID_ARGUMENT, UNSUPPORTED = 0, 1, 2
MEMORY_HOST, MEMORY_CUDA_DEVICE = 0, 1

# DLPack 0.6 (dlpack.h)
kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged = 1, 2, 3, 13
kDLInt, kDLUInt, kDLFloat, kDLBfloat = 0, 1, 2, 4


# ------------------------------------------------------------------ gllmk.h

class Tensor(C.Structure):
    _fields_ = [("buffer", C.c_void_p), ("offset", C.c_uint64), ("dtype", C.c_int32),
                ("ndim", C.c_int32), ("shape", C.c_int64 * MAX_DIMS),
                ("strides", C.c_int64 * MAX_DIMS)]


class ContextOptions(C.Structure):
    _fields_ = [("backend", C.c_char_p), ("device_index", C.c_uint32),
                ("num_threads", C.c_uint32), ("exclude", C.POINTER(C.c_char_p)),
                ("exclude_count", C.c_uint32), ("plugin_dir", C.c_char_p), ("queue", C.c_void_p)]


class DeviceInfo(C.Structure):
    _fields_ = [("name", C.c_char * 128), ("arch", C.c_char * 64), ("driver", C.c_char * 64),
                ("uuid", C.c_char * 48), ("memory_bytes", C.c_uint64),
                ("compute_units", C.c_uint32), ("flags", C.c_uint32)]


RELEASE = C.CFUNCTYPE(None, C.c_void_p)


class ExternalMemory(C.Structure):
    _fields_ = [("kind", C.c_uint32), ("address", C.c_uint64), ("size", C.c_uint64),
                ("release", RELEASE), ("release_data", C.c_void_p)]


class OpTiming(C.Structure):
    _fields_ = [("op", C.c_int), ("args", C.c_void_p), ("args_size", C.c_size_t),
                ("start_ns", C.c_uint64), ("end_ns", C.c_uint64), ("host_timed", C.c_uint32)]


TIMING_CALLBACK = C.CFUNCTYPE(None, C.c_void_p, C.POINTER(OpTiming))

_T = C.POINTER(Tensor)
_f, _i32, _u32, _u64 = C.c_float, C.c_int32, C.c_uint32, C.c_uint64

# Each op's argument struct, field for field. Tensor fields are the _T ones.
OP_FIELDS = {
    "copy": [("out", _T), ("src", _T)],
    "fill": [("out", _T), ("value", _f)],
    "add": [("out", _T), ("a", _T), ("b", _T)],
    "mul": [("out", _T), ("a", _T), ("b", _T)],
    "mul_add": [("out", _T), ("a", _T), ("b", _T), ("c", _T)],
    "silu": [("out", _T), ("x", _T)],
    "gelu": [("out", _T), ("x", _T), ("kind", _i32)],
    "add_gelu": [("out", _T), ("x", _T), ("bias", _T), ("kind", _i32)],
    "swiglu": [("out", _T), ("gate", _T), ("up", _T)],
    "rmsnorm": [("out", _T), ("x", _T), ("weight", _T), ("eps", _f)],
    "add_rmsnorm": [("out", _T), ("residual", _T), ("x", _T), ("weight", _T), ("eps", _f)],
    "layernorm": [("out", _T), ("x", _T), ("weight", _T), ("bias", _T), ("eps", _f)],
    "softmax": [("out", _T), ("x", _T), ("scale", _f)],
    "rope": [("out", _T), ("x", _T), ("positions", _T), ("theta", _f), ("rotary_dim", _i32),
             ("style", _i32), ("inv_freq", _T)],
    "embedding": [("out", _T), ("table", _T), ("ids", _T)],
    "matmul": [("out", _T), ("a", _T), ("b", _T), ("bias", _T), ("alpha", _f), ("beta", _f),
               ("b_layout", _i32), ("flags", _u32), ("a_norm", _i32), ("a_norm_eps", _f),
               ("rope_dim", _i32), ("rope_head_dim", _i32), ("rope_columns", _i32),
               ("rope_theta", _f), ("rope_positions", _T), ("rope_inv_freq", _T),
               ("glu", _i32), ("kv_first", _i32), ("kv_k_cache", _T), ("kv_v_cache", _T),
               ("kv_slots", _T)],
    "attention": [("out", _T), ("q", _T), ("k", _T), ("v", _T), ("kv_lens", _T), ("lse", _T),
                  ("scale", _f), ("causal", _i32)],
    "kv_append": [("k_cache", _T), ("v_cache", _T), ("k", _T), ("v", _T), ("slots", _T)],
    "paged_attention": [("out", _T), ("q", _T), ("k_cache", _T), ("v_cache", _T),
                        ("block_table", _T), ("q_starts", _T), ("seq_lens", _T),
                        ("scale", _f)],
    "argmax": [("out", _T), ("logits", _T)],
    "sample": [("out", _T), ("logits", _T), ("temperature", _f), ("top_p", _f),
               ("min_p", _f), ("top_k", _i32), ("seed", _u64), ("offset", _u64)],
}
# Tensors each op writes (read back when host memory is staged).
OP_WRITES = {name: ("out",) for name in OPS}
OP_WRITES.update(add_rmsnorm=("out", "residual"), attention=("out", "lse"),
                 kv_append=("k_cache", "v_cache"))

ARGS = {name: type("gllmk_%s_args" % name, (C.Structure,), {"_fields_": fields})
        for name, fields in OP_FIELDS.items()}
TENSOR_FIELDS = {name: tuple(f for f, t in fields if t is _T)
                 for name, fields in OP_FIELDS.items()}


# ---------------------------------------------------------- gllmk_model.h

PROGRESS = C.CFUNCTYPE(None, C.c_void_p, C.c_uint64, C.c_uint64)


class ModelLoadOptions(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("path", C.c_char_p), ("synthetic", C.c_char_p),
                ("seed", C.c_uint64), ("dtype", C.c_int32), ("progress", PROGRESS),
                ("progress_data", C.c_void_p)]


class ModelInfo(C.Structure):
    _fields_ = [("arch", C.c_uint32), ("model_type", C.c_char * 32), ("dtype", C.c_int32),
                ("hidden", C.c_uint32), ("intermediate", C.c_uint32), ("layers", C.c_uint32),
                ("heads", C.c_uint32), ("kv_heads", C.c_uint32), ("head_dim", C.c_uint32),
                ("vocab", C.c_uint32), ("max_position", C.c_uint32),
                ("weight_bytes", C.c_uint64), ("step_weight_bytes", C.c_uint64),
                ("load_seconds", C.c_double)]


class SessionOptions(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("cache_tokens", C.c_uint64),
                ("cache_bytes", C.c_uint64), ("block_size", C.c_uint32),
                ("max_sequences", C.c_uint32), ("max_batch_tokens", C.c_uint32)]


class SessionStats(C.Structure):
    _fields_ = [("block_size", C.c_uint32), ("blocks_total", C.c_uint32),
                ("blocks_free", C.c_uint32), ("max_sequences", C.c_uint32),
                ("live_sequences", C.c_uint32), ("max_batch_tokens", C.c_uint32),
                ("max_sequence_length", C.c_uint32), ("cache_bytes", C.c_uint64),
                ("recordings", C.c_uint32)]


class SeqInput(C.Structure):
    _fields_ = [("seq", C.c_uint32), ("token_count", C.c_uint32),
                ("tokens", C.POINTER(C.c_int32))]


class Sampling(C.Structure):
    _fields_ = [("temperature", C.c_float), ("top_k", C.c_int32), ("top_p", C.c_float),
                ("min_p", C.c_float), ("seed", C.c_uint64)]


# ---------------------------------------------------------------- dlpack.h

class DLDevice(C.Structure):
    _fields_ = [("device_type", C.c_int32), ("device_id", C.c_int32)]


class DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DLTensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("device", DLDevice), ("ndim", C.c_int32),
                ("dtype", DLDataType), ("shape", C.POINTER(C.c_int64)),
                ("strides", C.POINTER(C.c_int64)), ("byte_offset", C.c_uint64)]


class DLManagedTensor(C.Structure):
    pass


DL_DELETER = C.CFUNCTYPE(None, C.c_void_p)
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", C.c_void_p),
                            ("deleter", DL_DELETER)]

# The structs a test compares with C's sizeof/offsetof: name -> (C type, ctypes class).
STRUCTS = {"gllmk_tensor": Tensor, "gllmk_context_options": ContextOptions,
           "gllmk_device_info": DeviceInfo, "gllmk_external_memory": ExternalMemory,
           "gllmk_op_timing": OpTiming, "gllmk_model_load_options": ModelLoadOptions,
           "gllmk_model_info": ModelInfo, "gllmk_session_options": SessionOptions,
           "gllmk_session_stats": SessionStats, "gllmk_seq_input": SeqInput,
           "gllmk_sampling": Sampling, "DLManagedTensor": DLManagedTensor}
STRUCTS.update({cls.__name__: cls for cls in ARGS.values()})


# ----------------------------------------------------------------- loading

_P, _PP = C.c_void_p, C.POINTER(C.c_void_p)
_CORE_PROTOTYPES = {
    # name: (restype, argtypes)
    "gllmk_status_string": (C.c_char_p, [C.c_int]),
    "gllmk_last_error": (C.c_char_p, []),
    "gllmk_dtype_name": (C.c_char_p, [C.c_int]),
    "gllmk_op_name": (C.c_char_p, [C.c_int]),
    "gllmk_context_create_ex": (C.c_int, [C.POINTER(ContextOptions), C.c_size_t, _PP]),
    "gllmk_context_destroy": (None, [_P]),
    "gllmk_synchronize": (C.c_int, [_P]),
    "gllmk_context_backend": (C.c_char_p, [_P]),
    "gllmk_context_device_info": (C.c_int, [_P, C.POINTER(DeviceInfo)]),
    "gllmk_buffer_alloc": (C.c_int, [_P, C.c_uint64, _PP]),
    "gllmk_buffer_free": (None, [_P]),
    "gllmk_buffer_size": (C.c_uint64, [_P]),
    "gllmk_buffer_write": (C.c_int, [_P, C.c_uint64, _P, C.c_uint64]),
    "gllmk_buffer_read": (C.c_int, [_P, C.c_uint64, _P, C.c_uint64]),
    "gllmk_buffer_wrap": (C.c_int, [_P, C.POINTER(ExternalMemory), _PP]),
    "gllmk_buffer_address": (C.c_int, [_P, C.POINTER(C.c_uint32), C.POINTER(C.c_uint64)]),
    "gllmk_tensor_make": (C.c_int, [_P, C.c_uint64, C.c_int, C.c_int32,
                                    C.POINTER(C.c_int64), C.POINTER(Tensor)]),
    "gllmk_op_run": (C.c_int, [_P, C.c_int, _P, C.c_size_t]),
    "gllmk_op_supported": (C.c_int, [_P, C.c_int, _P, C.c_size_t]),
    "gllmk_context_set_timing": (C.c_int, [_P, TIMING_CALLBACK, _P]),
    "gllmk_dlpack_export": (C.c_int, [C.POINTER(Tensor), C.POINTER(C.POINTER(DLManagedTensor))]),
}
_MODEL_PROTOTYPES = {
    "gllmk_model_load": (C.c_int, [_P, C.POINTER(ModelLoadOptions), _PP]),
    "gllmk_model_load_parallel": (C.c_int, [_P, C.c_uint32, C.POINTER(ModelLoadOptions), _PP]),
    "gllmk_model_free": (None, [_P]),
    "gllmk_model_get_info": (C.c_int, [_P, C.POINTER(ModelInfo)]),
    "gllmk_session_create": (C.c_int, [_P, C.POINTER(SessionOptions), _PP]),
    "gllmk_session_destroy": (None, [_P]),
    "gllmk_session_seq_add": (C.c_int, [_P, C.POINTER(C.c_uint32)]),
    "gllmk_session_seq_free": (C.c_int, [_P, C.c_uint32]),
    "gllmk_session_seq_length": (C.c_int, [_P, C.c_uint32, C.POINTER(C.c_uint32)]),
    "gllmk_session_seq_reserve": (C.c_int, [_P, C.c_uint32, C.c_uint32]),
    "gllmk_session_get_stats": (C.c_int, [_P, C.POINTER(SessionStats)]),
    "gllmk_session_forward": (C.c_int, [_P, C.POINTER(SeqInput), C.c_uint32,
                                        C.POINTER(Sampling), C.POINTER(Tensor),
                                        C.POINTER(C.c_int32)]),
    "gllmk_session_decode": (C.c_int, [_P, C.POINTER(SeqInput), C.c_uint32, C.POINTER(Sampling),
                                       C.c_uint32, C.POINTER(C.c_int32)]),
}

lib = None        # libgllmk.so.0 once loaded
model_lib = None  # libgllmk-model.so.0, loaded on first use
_libdir = None


def _declare(handle, prototypes):
    for name, (restype, argtypes) in prototypes.items():
        fn = getattr(handle, name)
        fn.restype, fn.argtypes = restype, argtypes


def _installed_libdir():
    """LIBDIR of `make install-python` (gllmk/_paths.py), or None."""
    try:
        from . import _paths
    except ImportError:
        return None
    return _paths.LIBDIR


def _open(soname, libdir):
    if libdir:
        return C.CDLL(os.path.join(libdir, soname))
    try:
        return C.CDLL(soname)
    except OSError:
        found = ctypes.util.find_library(soname.split(".so")[0][3:])
        installed = _installed_libdir()
        if found is None and installed:
            found = os.path.join(installed, soname)
        if found is None:
            raise
        return C.CDLL(found)


def load(libdir=None):
    """Loads libgllmk.so.0 (from `libdir` if given, else $GLLMK_LIBRARY_DIR,
    else the system's library path); returns the ctypes handle. Called by
    every entry point; an explicit call must come before the first context."""
    global lib, _libdir
    libdir = libdir or os.environ.get("GLLMK_LIBRARY_DIR") or None
    if lib is not None:
        if libdir and os.path.realpath(libdir) != _libdir:
            raise RuntimeError("gllmk: libgllmk is already loaded from %s" % (_libdir or "the system"))
        return lib
    try:
        handle = _open("libgllmk.so.0", libdir)
    except OSError as e:
        where = libdir or "the system library path ($GLLMK_LIBRARY_DIR or gllmk.load(DIR) " \
                          "for a build tree)"
        raise ImportError("gllmk: cannot load libgllmk.so.0 from %s: %s" % (where, e)) from None
    _declare(handle, _CORE_PROTOTYPES)
    for i, name in enumerate(OPS):
        have = handle.gllmk_op_name(i)
        if have is None or have.decode() != name:
            raise ImportError("gllmk: op %d of this libgllmk is %r, the bindings expect %r"
                              % (i, have, name))
    lib, _libdir = handle, libdir and os.path.realpath(libdir)
    return lib


def load_model_lib():
    global model_lib
    if model_lib is None:
        load()
        try:
            handle = _open("libgllmk-model.so.0", _libdir)
        except OSError as e:
            raise ImportError("gllmk: cannot load libgllmk-model.so.0: %s" % e) from None
        _declare(handle, _MODEL_PROTOTYPES)
        model_lib = handle
    return model_lib


def last_error():
    return (lib.gllmk_last_error() or b"").decode(errors="replace")


# ------------------------------------------------------------------ errors

class Closable:
    """`with` and garbage collection call close(), which a subclass defines
    (idempotent: it may run twice)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Error(RuntimeError):
    """A gllmk call failed: `status` (gllmk_status), `status_name`, and the
    message is gllmk_last_error() as the library wrote it."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.status_name = STATUS[status] if 0 <= status < len(STATUS) else str(status)
        self.message = message


class InvalidArgumentError(Error, ValueError):
    pass


class UnsupportedError(Error, NotImplementedError):
    pass


class OutOfMemoryError(Error, MemoryError):
    pass


class OutOfRangeError(Error, IndexError):
    pass


_ERROR_CLASS = {1: InvalidArgumentError, 2: UnsupportedError, 3: OutOfMemoryError,
                4: OutOfRangeError}


def error(status, message=None):
    """The exception for a failed call (message: gllmk_last_error())."""
    return _ERROR_CLASS.get(status, Error)(status, last_error() if message is None else message)


def check(status):
    if status:
        raise error(status)
