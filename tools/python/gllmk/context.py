"""gllmk.Context: one backend, one device, one queue; and how one op call's
arrays become gllmk tensors.

Memory (docs/python.md): every array of a call is described (shape, strides,
dtype, address) and arrays whose bytes overlap share one gllmk buffer, so
gllmk's own checks see in-place calls and forbidden overlaps exactly as in C.
Each such range is wrapped with gllmk_buffer_wrap, without a copy, where the
backend can address the memory (host memory on cpu, CUDA memory on cuda);
wraps are cached per context by (kind, address, size), because freeing a
buffer waits for the queue. A backend that cannot wrap host memory (vulkan,
hsa) gets the host bytes staged: copied into a device buffer, the op run,
written outputs copied back. Host memory is synchronized before the call
returns (its results are read at once, and device errors such as an
embedding id out of range surface at the call); CUDA memory is not: the op is
queued on the stream, like a PyTorch op.
"""
import ctypes as C
import threading
import weakref

from . import _capi
from ._capi import Error, check

# Open contexts, for gllmk.trace() (which turns timing on for each).
_live = weakref.WeakSet()
_trace_hooks = []  # callables(context) run when a context is made
_WRAP_CACHE_MAX = 256
_PLAN_CACHE_MAX = 1024


def _queue_handle(stream):
    """A CUstream handle from an int, None or an object with .cuda_stream
    (torch.cuda.Stream). PyTorch's default stream is the legacy stream
    (handle 0): CU_STREAM_LEGACY (1) orders with it, as NULL would not."""
    if stream is None:
        return None
    handle = getattr(stream, "cuda_stream", stream)
    return int(handle) or 1


class Context(_capi.Closable):
    """A gllmk context: Context(backend=None, *, device_index=0,
    num_threads=0, stream=None, plugin_dir=None, exclude=()).

    backend=None lets gllmk choose (CUDA > ROCm > Metal > Vulkan > CPU);
    stream (a CUstream handle or a torch.cuda.Stream) runs a cuda context on
    the caller's stream (gllmk_context_options.queue), which must outlive
    the context. Use from one thread at a time (a lock enforces it)."""

    def __init__(self, backend=None, *, device_index=0, num_threads=0, stream=None,
                 plugin_dir=None, exclude=()):
        lib = _capi.load()
        self._handle = None
        excluded = (C.c_char_p * max(1, len(exclude)))(*[e.encode() for e in exclude])
        queue = _queue_handle(stream)
        options = _capi.ContextOptions(
            backend=backend.encode() if backend else None, device_index=device_index,
            num_threads=num_threads, exclude=excluded if exclude else None,
            exclude_count=len(exclude), plugin_dir=plugin_dir.encode() if plugin_dir else None,
            queue=queue)
        handle = C.c_void_p()
        check(lib.gllmk_context_create_ex(C.byref(options), C.sizeof(options), C.byref(handle)))
        self._lib = lib
        self._handle = handle
        self._stream_object = stream  # kept alive with the context
        self.stream = queue
        self.backend = lib.gllmk_context_backend(handle).decode()
        self.device_index = device_index
        self._lock = threading.Lock()
        self._wraps = {}         # (kind, address, size) -> buffer handle (int)
        self._plans = {}         # call key -> prepared arguments (see run)
        self._host_wrap = True   # False once the backend refused host memory
        self._timing = None      # the ctypes callback while timing is on
        _live.add(self)
        for hook in list(_trace_hooks):
            hook(self)

    # ------------------------------------------------------------ basics

    @property
    def handle(self):
        """The gllmk_context* as an int (for ctypes callers)."""
        self._check_open()
        return self._handle.value

    def _check_open(self):
        if self._handle is None:
            raise Error(_capi.INVALID_ARGUMENT, "gllmk: the context is closed")

    def device_info(self):
        """gllmk_device_info as a dict."""
        self._check_open()
        info = _capi.DeviceInfo()
        check(self._lib.gllmk_context_device_info(self._handle, C.byref(info)))
        return {"name": info.name.decode(), "arch": info.arch.decode(),
                "driver": info.driver.decode(), "uuid": info.uuid.decode(),
                "memory_bytes": info.memory_bytes, "compute_units": info.compute_units,
                "software": bool(info.flags & 1), "unified_memory": bool(info.flags & 2)}

    def synchronize(self):
        """Waits for queued work; raises the first error the device raised
        since the last synchronize (e.g. OutOfRangeError from embedding)."""
        self._check_open()
        with self._lock:
            check(self._lib.gllmk_synchronize(self._handle))

    def close(self):
        """Waits for queued work and destroys the context with its buffers
        (tensors made on it become unusable). Idempotent."""
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        self._wraps.clear()
        self._plans.clear()
        self._lib.gllmk_context_destroy(handle)
        self._timing = None

    def __repr__(self):
        state = "closed" if self._handle is None else self.backend
        return "<gllmk.Context %s%s>" % (state, " stream=0x%x" % self.stream if self.stream else "")

    # ------------------------------------------------------- device tensors

    def empty(self, shape, dtype="f32"):
        """A new device tensor (gllmk.Tensor) of this context, contents unspecified."""
        from .tensors import Tensor
        return Tensor.empty(self, shape, dtype)

    def tensor(self, array):
        """A device copy of a host array (numpy, BF16, CPU torch tensor)."""
        from .tensors import Tensor
        return Tensor.from_host(self, array)

    # ------------------------------------------------------------ timing

    def _set_timing(self, callback):
        """callback(gllmk_op_timing) for each op, delivered at synchronize;
        None turns timing off (delivering what is pending first)."""
        self._check_open()
        with self._lock:
            if callback is None:
                status = self._lib.gllmk_context_set_timing(self._handle,
                                                            _capi.TIMING_CALLBACK(), None)
                self._timing = None
            else:
                fn = _capi.TIMING_CALLBACK(lambda _data, record: callback(record.contents))
                status = self._lib.gllmk_context_set_timing(self._handle, fn, None)
                if status == 0:
                    self._timing = fn
            check(status)

    # ----------------------------------------------------------- op calls

    def _wrap(self, kind, address, size, may_stage):
        """A cached buffer over [address, address + size), or None when the
        backend cannot use host memory and may_stage (the caller stages it)."""
        key = (kind, address, size)
        buffer = self._wraps.get(key)
        if buffer is not None:
            return buffer
        if kind == _capi.MEMORY_HOST and not self._host_wrap and may_stage:
            return None
        memory = _capi.ExternalMemory(kind=kind, address=address, size=size)
        handle = C.c_void_p()
        status = self._lib.gllmk_buffer_wrap(self._handle, C.byref(memory), C.byref(handle))
        if status == _capi.UNSUPPORTED and kind == _capi.MEMORY_HOST:
            self._host_wrap = False
            if may_stage:
                return None
        check(status)
        if len(self._wraps) >= _WRAP_CACHE_MAX:  # free the oldest quarter (waits for the queue)
            self._plans.clear()  # they may use those buffers
            for old in list(self._wraps)[:_WRAP_CACHE_MAX // 4]:
                self._lib.gllmk_buffer_free(self._wraps.pop(old))
        self._wraps[key] = handle.value
        return handle.value

    def run(self, op, tensors, scalars):
        """Runs op `op` (a name of gllmk_ops.def) on `tensors` ({field:
        described array}, see tensors.describe; absent = NULL) with `scalars`
        ({field: value}). Raises the gllmk error on failure.

        A call whose arrays are all zero-copy keeps its prepared argument
        struct, keyed by the arrays' addresses, dtypes, shapes and strides
        and the scalars: the same call again costs one dictionary lookup."""
        if self._handle is None:
            self._check_open()
        key = (op, tuple([(f, d.key) for f, d in tensors.items()]), tuple(scalars.values()))
        lib = self._lib
        with self._lock:
            plan = self._plans.get(key)
            staged = ()
            if plan is None:
                plan, staged = self._prepare(op, tensors, scalars)
            try:
                status = lib.gllmk_op_run(self._handle, plan[0], plan[1], plan[2])
                if status:
                    self._plans.pop(key, None)
                    raise _capi.error(status)
                if not staged and key not in self._plans:
                    if len(self._plans) >= _PLAN_CACHE_MAX:
                        self._plans.clear()
                    self._plans[key] = plan
                for buffer, address, size, written in staged:
                    if written:
                        check(lib.gllmk_buffer_read(buffer, 0, address, size))
                if plan[3]:
                    check(lib.gllmk_synchronize(self._handle))
            finally:
                for buffer, *_ in staged:
                    lib.gllmk_buffer_free(buffer)

    def _prepare(self, op, tensors, scalars):
        """((op id, byref(args), sizeof(args), sync after, args), staged
        buffers [(buffer, host address, size, written)])."""
        lib = self._lib
        args = _capi.ARGS[op](**scalars)
        staged = []
        sync = False
        try:
            writes = _capi.OP_WRITES[op]
            # Host memory is staged only in a call of host memory alone: mixed
            # with device memory it is an error (gllmk_buffer_wrap's message).
            may_stage = all(d.kind != _capi.MEMORY_CUDA_DEVICE for d in tensors.values())
            for group in _groups(tensors):
                first = group[0][1]
                if first.kind is None:  # a gllmk.Tensor: already a device tensor
                    for field, d in group:
                        setattr(args, field, C.pointer(d.ctensor))
                    continue
                spans = [d.span() for _, d in group]
                lo = min(a for a, _ in spans)
                size = max(b for _, b in spans) - lo
                buffer = self._wrap(first.kind, lo, size, may_stage)
                if buffer is None:
                    buffer = _stage(lib, self._handle, lo, size)
                    staged.append((buffer, lo, size, any(f in writes for f, _ in group)))
                else:
                    sync = sync or first.kind == _capi.MEMORY_HOST
                for field, d in group:
                    setattr(args, field, C.pointer(d.tensor(buffer, d.ptr - lo)))
        except BaseException:
            for buffer, *_ in staged:
                lib.gllmk_buffer_free(buffer)
            raise
        return (_capi.OP_ID[op], C.byref(args), C.sizeof(args), sync, args), staged


def _groups(tensors):
    """The call's arrays grouped by memory: gllmk.Tensors one by one, other
    arrays merged where their byte ranges overlap (same kind and device)."""
    items = sorted(((d.span(), f, d) for f, d in tensors.items()),
                   key=lambda x: (x[2].kind is None, x[2].kind or 0, x[2].device, x[0]))
    groups, top = [], None
    for (lo, hi), field, d in items:
        if d.kind is not None and groups and (groups[-1][0][1].kind, groups[-1][0][1].device) \
                == (d.kind, d.device) and lo < top:
            groups[-1].append((field, d))
            top = max(top, hi)
            continue
        groups.append([(field, d)])
        top = hi
    return groups


def _stage(lib, context, address, size):
    """A device buffer holding a copy of host bytes [address, address + size)."""
    handle = C.c_void_p()
    check(lib.gllmk_buffer_alloc(context, size, C.byref(handle)))
    status = lib.gllmk_buffer_write(handle, 0, address, size)
    if status:
        err = _capi.error(status)
        lib.gllmk_buffer_free(handle)
        raise err
    return handle.value


# ------------------------------------------------------- default contexts

_defaults_lock = threading.Lock()
_host_default = None
_cuda_defaults = {}  # (device, stream) -> Context


def default_context():
    """The context host arrays use when no context= is given: the cpu
    backend (zero copy), or gllmk's own choice where there is no cpu plugin."""
    global _host_default
    with _defaults_lock:
        if _host_default is None or _host_default._handle is None:
            try:
                _host_default = Context("cpu")
            except Error:
                _host_default = Context()
        return _host_default


def cuda_context(device_index, stream):
    """The cuda context on `stream` (a CUstream handle) of CUDA device
    `device_index`, made once per (device, stream)."""
    key = (device_index, stream or 1)
    context = _cuda_defaults.get(key)
    if context is not None and context._handle is not None:
        return context
    with _defaults_lock:
        context = _cuda_defaults.get(key)
        if context is None or context._handle is None:
            context = _cuda_defaults[key] = Context("cuda", device_index=device_index,
                                                    stream=stream or 1)
        return context
