#!/usr/bin/env python3
"""cuda_interop.py - ABI v2's interop on a CUDA GPU, against PyTorch in the
same process: a context on PyTorch's current stream, PyTorch memory wrapped
as gllmk buffers (gllmk_buffer_wrap and DLPack both ways), an op recorded and
replayed as a CUDA graph, and per-op device timing.

usage: cuda_interop.py LIBDIR   (LIBDIR holds libgllmk.so.0 and gllmk/)
Exit status 0 when every check passed; each check prints one line.
"""
import ctypes as C
import sys

import torch
import torch.utils.dlpack

LIB = C.CDLL(sys.argv[1] + "/libgllmk.so.0")
F32, BF16 = 0, 2
OP_SILU = 5  # position in gllmk_ops.def
CUDA_DEVICE_MEMORY = 1
MAX_DIMS = 8


class Tensor(C.Structure):
    _fields_ = [("buffer", C.c_void_p), ("offset", C.c_uint64), ("dtype", C.c_int32),
                ("ndim", C.c_int32), ("shape", C.c_int64 * MAX_DIMS),
                ("strides", C.c_int64 * MAX_DIMS)]


class Options(C.Structure):
    _fields_ = [("backend", C.c_char_p), ("device_index", C.c_uint32),
                ("num_threads", C.c_uint32), ("exclude", C.c_void_p),
                ("exclude_count", C.c_uint32), ("plugin_dir", C.c_char_p), ("queue", C.c_void_p)]


class SiluArgs(C.Structure):
    _fields_ = [("out", C.POINTER(Tensor)), ("x", C.POINTER(Tensor))]


RELEASE = C.CFUNCTYPE(None, C.c_void_p)


class ExternalMemory(C.Structure):
    _fields_ = [("kind", C.c_uint32), ("address", C.c_uint64), ("size", C.c_uint64),
                ("release", RELEASE), ("release_data", C.c_void_p)]


class OpTiming(C.Structure):
    _fields_ = [("op", C.c_int), ("args", C.c_void_p), ("args_size", C.c_size_t),
                ("start_ns", C.c_uint64), ("end_ns", C.c_uint64), ("host_timed", C.c_uint32)]


TIMING = C.CFUNCTYPE(None, C.c_void_p, C.POINTER(OpTiming))
LIB.gllmk_last_error.restype = C.c_char_p
LIB.gllmk_context_backend.restype = C.c_char_p
for name in ("gllmk_op_run", "gllmk_dlpack_import", "gllmk_dlpack_export", "gllmk_buffer_wrap",
             "gllmk_context_create_ex", "gllmk_recording_begin", "gllmk_recording_end",
             "gllmk_recording_replay", "gllmk_synchronize", "gllmk_context_set_timing",
             "gllmk_buffer_address"):
    getattr(LIB, name).restype = C.c_int
LIB.gllmk_op_run.argtypes = [C.c_void_p, C.c_int, C.c_void_p, C.c_size_t]
LIB.gllmk_buffer_free.argtypes = [C.c_void_p]
LIB.gllmk_recording_free.argtypes = [C.c_void_p]
LIB.gllmk_recording_replay.argtypes = [C.c_void_p]
LIB.gllmk_recording_is_native.argtypes = [C.c_void_p]
LIB.gllmk_context_destroy.argtypes = [C.c_void_p]
LIB.gllmk_synchronize.argtypes = [C.c_void_p]
LIB.gllmk_recording_begin.argtypes = [C.c_void_p]
LIB.gllmk_recording_end.argtypes = [C.c_void_p, C.POINTER(C.c_void_p)]
C.pythonapi.PyCapsule_GetPointer.restype = C.c_void_p
C.pythonapi.PyCapsule_GetPointer.argtypes = [C.py_object, C.c_char_p]
C.pythonapi.PyCapsule_SetName.argtypes = [C.py_object, C.c_char_p]
C.pythonapi.PyCapsule_New.restype = C.py_object
C.pythonapi.PyCapsule_New.argtypes = [C.c_void_p, C.c_char_p, C.c_void_p]

failures = 0


def check(name, ok, detail=""):
    global failures
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")
    failures += 0 if ok else 1


def must(status, what):
    if status != 0:
        raise SystemExit(f"FAIL {what}: status {status}: {LIB.gllmk_last_error().decode()}")


def wrap(ctx, t, released):
    """A gllmk buffer over a PyTorch CUDA tensor's memory, and a tensor of it."""
    memory = ExternalMemory(CUDA_DEVICE_MEMORY, t.data_ptr(), t.numel() * t.element_size(),
                            RELEASE(lambda _: released.append(1)), None)
    buffer = C.c_void_p()
    must(LIB.gllmk_buffer_wrap(ctx, C.byref(memory), C.byref(buffer)), "gllmk_buffer_wrap")
    view = Tensor(buffer.value, 0, BF16 if t.dtype == torch.bfloat16 else F32, t.dim())
    for i, (n, s) in enumerate(zip(t.shape, t.stride())):
        view.shape[i], view.strides[i] = n, s
    return buffer, view, memory


def main():
    stream = torch.cuda.Stream()
    torch.cuda.set_stream(stream)
    options = Options(backend=b"cuda", queue=stream.cuda_stream)
    ctx = C.c_void_p()
    must(LIB.gllmk_context_create_ex(C.byref(options), C.sizeof(options), C.byref(ctx)),
         "gllmk_context_create on PyTorch's stream")

    # 1. PyTorch memory, on PyTorch's stream: no synchronize between the two.
    released = []
    x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(x)
    xb, xt, xm = wrap(ctx, x, released)
    ob, ot, om = wrap(ctx, out, released)
    x.mul_(2.0)  # queued on the stream before gllmk's op: silu must see it
    args = SiluArgs(C.pointer(ot), C.pointer(xt))
    must(LIB.gllmk_op_run(ctx, OP_SILU, C.byref(args), C.sizeof(args)), "gllmk_silu")
    got = out.float().clone()  # ordered after gllmk's kernel by the shared stream
    stream.synchronize()
    want = torch.nn.functional.silu(x.float())
    err = (got - want).abs().max().item()
    check("silu on wrapped PyTorch memory, on PyTorch's stream", err < 0.05, f"max error {err:.3g}")

    # 2. Recorded and replayed as a CUDA graph, after the input changed.
    rec = C.c_void_p()
    must(LIB.gllmk_recording_begin(ctx), "gllmk_recording_begin")
    must(LIB.gllmk_op_run(ctx, OP_SILU, C.byref(args), C.sizeof(args)), "record silu")
    must(LIB.gllmk_recording_end(ctx, C.byref(rec)), "gllmk_recording_end")
    check("recording is a CUDA graph", LIB.gllmk_recording_is_native(rec) == 1)
    x.copy_(torch.randn_like(x))
    must(LIB.gllmk_recording_replay(rec), "gllmk_recording_replay")
    got = out.float().clone()
    stream.synchronize()
    err = (got - torch.nn.functional.silu(x.float())).abs().max().item()
    check("graph replay after the input changed", err < 0.05, f"max error {err:.3g}")
    LIB.gllmk_recording_free(rec)

    # 3. Device timing.
    records = []
    callback = TIMING(lambda _, t: records.append((t.contents.op, t.contents.start_ns,
                                                   t.contents.end_ns, t.contents.host_timed)))
    must(LIB.gllmk_context_set_timing(ctx, callback, None), "gllmk_context_set_timing")
    for _ in range(3):
        must(LIB.gllmk_op_run(ctx, OP_SILU, C.byref(args), C.sizeof(args)), "timed silu")
    must(LIB.gllmk_synchronize(ctx), "gllmk_synchronize")
    must(LIB.gllmk_context_set_timing(ctx, TIMING(), None), "timing off")
    spans = [(e - s) / 1e3 for _, s, e, _ in records]
    check("three device-timed ops", len(records) == 3 and all(r[3] == 0 for r in records)
          and all(b[1] >= a[2] for a, b in zip(records, records[1:])) and all(s > 0 for s in spans),
          "us " + ", ".join(f"{s:.1f}" for s in spans))

    # 4. DLPack: PyTorch -> gllmk (deleter runs at free) and gllmk -> PyTorch.
    y = torch.arange(12, device="cuda", dtype=torch.float32).reshape(3, 4)[:, 1:]  # strided view
    capsule = torch.utils.dlpack.to_dlpack(y)
    managed = C.pythonapi.PyCapsule_GetPointer(capsule, b"dltensor")
    yb, yt = C.c_void_p(), Tensor()
    must(LIB.gllmk_dlpack_import(ctx, C.c_void_p(managed), C.byref(yb), C.byref(yt)), "gllmk_dlpack_import")
    C.pythonapi.PyCapsule_SetName(capsule, b"used_dltensor")  # gllmk owns it now
    check("DLPack import keeps the view's strides", yt.ndim == 2 and yt.strides[0] == 4 and yt.shape[1] == 3)
    yargs = SiluArgs(C.pointer(yt), C.pointer(yt))
    want = torch.nn.functional.silu(y.clone())
    must(LIB.gllmk_op_run(ctx, OP_SILU, C.byref(yargs), C.sizeof(yargs)), "silu on the DLPack view")
    exported = C.c_void_p()
    must(LIB.gllmk_dlpack_export(C.byref(yt), C.byref(exported)), "gllmk_dlpack_export")
    back = torch.utils.dlpack.from_dlpack(C.pythonapi.PyCapsule_New(exported, b"dltensor", None))
    stream.synchronize()
    same_memory = back.data_ptr() == y.data_ptr() and back.stride() == y.stride()
    err = (back - want).abs().max().item()
    check("DLPack export is PyTorch's own memory, updated in place", same_memory and err < 1e-5,
          f"max error {err:.3g}")
    del back

    for b in (xb, ob, yb):
        LIB.gllmk_buffer_free(b)
    check("release callbacks ran once per wrapped buffer", len(released) == 2)
    LIB.gllmk_context_destroy(ctx)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
