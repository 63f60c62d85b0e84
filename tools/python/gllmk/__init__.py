"""gllmk from Python: the ops of libgllmk on NumPy arrays, PyTorch tensors or
anything that speaks DLPack, without copies; the generator of
libgllmk-model; Chrome traces of any run. Pure Python (ctypes).

    import gllmk
    y = gllmk.rmsnorm(x, w, eps=1e-5)          # x, w: numpy or torch (CUDA: its stream)
    ctx = gllmk.Context(backend="vulkan")        # or pick a backend explicitly
    y = ctx.swiglu(gate, up)
    with gllmk.trace("run.json"):                # Perfetto / chrome://tracing
        ids = list(gllmk.Model("tiny", context=ctx).generate([1, 2, 3], max_new=8))

The libraries: gllmk.load(libdir) before anything else, or
$GLLMK_LIBRARY_DIR, else the installed libgllmk.so.0. docs/python.md.
"""
from ._capi import (Error, InvalidArgumentError, OutOfMemoryError, OutOfRangeError,
                    UnsupportedError, load)
from .context import Context, cuda_context, default_context
from .model import Model, Session
from .ops import (add, add_gelu, add_rmsnorm, argmax, attention, context_for, copy, embedding,
                  fill, gelu, kv_append, layernorm, matmul, mul, mul_add, paged_attention, rmsnorm,
                  rope, sample, silu, softmax, swiglu)
from .tensors import BF16, Tensor
from .trace import trace

__version__ = "0.2.0"

__all__ = ["Error", "InvalidArgumentError", "OutOfMemoryError", "OutOfRangeError",
           "UnsupportedError", "load", "Context", "cuda_context", "default_context", "Model",
           "Session", "BF16", "Tensor", "trace", "context_for", "__version__",
           "copy", "fill", "add", "mul", "mul_add", "silu", "gelu", "add_gelu", "swiglu",
           "rmsnorm", "add_rmsnorm", "layernorm", "softmax", "rope", "embedding", "matmul",
           "attention", "kv_append", "paged_attention", "argmax", "sample"]
