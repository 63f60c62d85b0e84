"""gllmk.trace(path): a Chrome trace (Trace Event Format, for Perfetto or
chrome://tracing) of every op run on any gllmk context while it is open.

    with gllmk.trace("run.json") as t:
        ...                       # ops, Model.generate, anything on a gllmk.Context
    t.events                      # the "X" events, also written to run.json

Each op is one complete ("X") event: name = the op, ts/dur in microseconds
from the device timestamps of gllmk_context_set_timing (args.host_timed = 1
where the backend has none and the core timed it on the host), pid = this
process, tid = one track per context; args hold the tensors' shapes, the
dtype, bytes and FLOPs (cost() below, the same model as the C tools').

Clocks: a context's device clock is used as is when it is the host's
CLOCK_MONOTONIC (cpu, cuda's marks, host timing); otherwise (Vulkan ticks)
it is shifted so that no op ends after the host received its record.
"""
import ctypes as C
import json
import os
import time
import weakref

from . import _capi
from . import context as _context

_active = None


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


# FLOPs per output element of the row and elementwise ops (a model, for the
# trace: one per add, multiply, compare; transcendental functions as 4).
_PER_ELEMENT = {"add": 1, "mul": 1, "mul_add": 2, "silu": 6, "gelu": 8, "add_gelu": 9,
                "swiglu": 7, "rmsnorm": 4, "add_rmsnorm": 5, "layernorm": 7, "softmax": 7,
                "copy": 0, "fill": 0, "embedding": 0}


def cost(op, shapes, dtype_sizes, scalars):
    """(bytes, flops) of one call: bytes of the tensors it reads and writes
    (the rows an embedding gathers, the tokens kv_append writes, at most the
    blocks a paged block table can name), FLOPs by the model above, 2 per
    multiply-add in matmul and attention."""
    def nbytes(name):
        return _numel(shapes[name]) * dtype_sizes[name] if name in shapes else 0
    total = sum(nbytes(n) for n in shapes)
    flops = 0
    out = shapes.get("out")
    if op == "embedding":
        total = 2 * nbytes("out") + nbytes("ids")
    elif op == "kv_append":
        total = 2 * (nbytes("k") + nbytes("v")) + nbytes("slots")
    elif op == "paged_attention":
        blocks, block_size, hkv, d = shapes["k_cache"]
        table_rows, max_blocks = shapes["block_table"]
        keys = min(blocks, table_rows * max_blocks) * block_size
        cache = 2 * keys * hkv * d * dtype_sizes["k_cache"]
        total = total - nbytes("k_cache") - nbytes("v_cache") + cache
        t, hq, _ = shapes["q"]
        flops = 4 * t * hq * d * min(keys, max_blocks * block_size)
    elif op == "matmul":
        a = shapes["a"]
        m, k = a[-2], a[-1]
        flops = 2 * _numel(a[:-2]) * m * k * out[-1]
        if scalars.get("beta"):
            total += nbytes("out")
    elif op == "attention":
        b, sq, hq, d = shapes["q"]
        skv = shapes["k"][1]
        if scalars.get("causal"):
            keys = sum(min(skv, max(0, i + skv - sq + 1)) for i in range(sq))
        else:
            keys = sq * skv
        flops = 4 * b * hq * d * keys
    elif op == "rope":
        t, h, _ = shapes["x"]
        flops = 6 * t * h * (scalars.get("rotary_dim", 0) // 2)
    elif op in ("argmax", "sample"):
        flops = (1 if op == "argmax" else 5) * _numel(shapes["logits"])
    else:
        flops = _PER_ELEMENT.get(op, 0) * _numel(out)
    return total, flops


def snapshot(record):
    """The bytes of a gllmk_op_timing record's arguments and tensors, taken
    during the callback (the pointers are valid only then): (op, args bytes,
    {field: tensor bytes}). Decoded later, by describe_call."""
    op = _capi.OPS[record.op]
    args = _capi.ARGS[op].from_address(record.args)
    tensors = {}
    for field in _capi.TENSOR_FIELDS[op]:
        pointer = getattr(args, field)
        if pointer:
            tensors[field] = C.string_at(C.addressof(pointer.contents), _TENSOR_SIZE)
    return op, C.string_at(record.args, C.sizeof(args)), tensors


_TENSOR_SIZE = C.sizeof(_capi.Tensor)


def describe_call(op, args_bytes, tensor_bytes):
    """(op name, event args: shapes, dtype, bytes, flops) of a snapshot."""
    args = _capi.ARGS[op].from_buffer_copy(args_bytes)
    shapes, sizes, dtypes = {}, {}, {}
    for field, raw in tensor_bytes.items():
        t = _capi.Tensor.from_buffer_copy(raw)
        shapes[field] = tuple(t.shape[:t.ndim])
        dtypes[field] = _capi.DTYPES[t.dtype]
        sizes[field] = _capi.DTYPE_SIZE[dtypes[field]]
    floats = [d for d in dtypes.values() if d != "i32"]
    dtype = floats[0] if floats else "i32"  # out's, for copy the target's
    scalars = {f: getattr(args, f) for f, t in _capi.OP_FIELDS[op] if t is not _capi._T}
    total, flops = cost(op, shapes, sizes, scalars)
    return op, {"shapes": {k: list(v) for k, v in shapes.items()}, "dtype": dtype,
                "bytes": total, "flops": flops}


class trace:
    """Context manager: records every op of every gllmk context (open now or
    made inside) and writes a Chrome trace to `path` (if given) at exit."""

    def __init__(self, path=None):
        self.path = path
        self.events = []
        self._raw = []      # (track, snapshot, start_ns, end_ns, host_timed, delivered_ns)
        self._tracks = {}   # id(context) -> (weak reference, tid, backend)

    def _attach(self, ctx):
        if id(ctx) in self._tracks or ctx._handle is None:
            return
        track = len(self._tracks) + 1
        self._tracks[id(ctx)] = (weakref.ref(ctx), track, ctx.backend)

        def on_op(record):  # runs inside synchronize: keep it short
            self._raw.append((track, snapshot(record), record.start_ns, record.end_ns,
                              record.host_timed, time.monotonic_ns()))
        ctx._set_timing(on_op)

    def __enter__(self):
        global _active
        if _active is not None:
            raise RuntimeError("gllmk.trace: a trace is already open")
        _active = self
        self._start_ns = time.monotonic_ns()
        for ctx in list(_context._live):
            self._attach(ctx)
        _context._trace_hooks.append(self._attach)
        return self

    def __exit__(self, *exc):
        global _active
        _context._trace_hooks.remove(self._attach)
        _active = None
        for ref, _, _ in self._tracks.values():
            ctx = ref()
            if ctx is not None and ctx._handle is not None:
                ctx._set_timing(None)  # delivers what is still queued
        self.events = self._build()
        if self.path:
            with open(self.path, "w") as f:
                json.dump(self.document(), f, indent=None, separators=(",", ":"))
                f.write("\n")

    def _build(self):
        offsets = {}
        for track, _, _, end, _, delivered in self._raw:
            offsets[track] = min(offsets.get(track, delivered - end), delivered - end)
        events, decoded = [], {}
        for track, (op, args_bytes, tensors), start, end, host_timed, _ in self._raw:
            offset = offsets[track]
            same_clock = 0 <= offset < 600 * 10**9
            shift = 0 if same_clock else offset
            key = (op, args_bytes, tuple(tensors.items()))
            if key not in decoded:
                decoded[key] = describe_call(op, args_bytes, tensors)
            op, args = decoded[key]
            args = dict(args, host_timed=host_timed)
            events.append({"name": op, "cat": "gllmk", "ph": "X", "pid": os.getpid(),
                           "tid": track, "ts": (start + shift - self._start_ns) / 1e3,
                           "dur": (end - start) / 1e3, "args": args})
        return events

    def document(self):
        """The whole trace as a dict ({"traceEvents": [...], ...})."""
        pid = os.getpid()
        meta = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                 "args": {"name": "gllmk (python, pid %d)" % pid}}]
        for _, track, backend in self._tracks.values():
            meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": track,
                         "args": {"name": "%s context %d" % (backend, track)}})
        return {"traceEvents": meta + self.events, "displayTimeUnit": "ns",
                "otherData": {"producer": "gllmk python", "clock": "CLOCK_MONOTONIC, "
                              "microseconds from the trace's start"}}
