"""The generator (libgllmk-model): a whole decoder-only model on the device.

    model = gllmk.Model("path/to/Llama-3.2-1B")          # or Model("tiny"): synthetic
    for token in model.generate([1, 2, 3], max_new=16, temperature=0.7, seed=1):
        print(token)

    s = model.session(cache_tokens=4096)                   # lower level: batches
    a, b = s.add(), s.add()
    tokens = s.forward({a: prompt_a, b: prompt_b})         # prefill both: next token of each
    tokens, logits = s.forward({a: [tokens[0]], b: [tokens[1]]}, logits=True)
    logits.numpy()                                         # [2, vocab] float32 copy
"""
import contextlib
import ctypes as C
import os
import weakref

from . import _capi
from ._capi import Error, check
from .context import Context
from .ops import _dtype_name
from .tensors import Tensor

SYNTHETIC = ("tiny", "llama3.2-1b", "llama3-8b", "qwen2.5-7b")
_ARCH = ("llama", "qwen2", "qwen3")


def _sampling(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, seed=0):
    return _capi.Sampling(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                          seed=seed)


class Model(_capi.Closable):
    """Model(source, *, context=None, contexts=None, dtype=None, seed=0, progress=None).

    source: a Hugging Face model directory, or the name of a synthetic model
    (random weights made on the device: "tiny", "llama3.2-1b", "llama3-8b",
    "qwen2.5-7b"); synthetic=NAME says so explicitly. context: a
    gllmk.Context (default: gllmk's automatic choice). contexts: instead, a
    list of contexts of one backend to split the model over (tensor
    parallelism, gllmk_model_load_parallel: one GPU each on cuda, or several
    cpu contexts); the model runs on them from the calling thread and
    `context` is the first. dtype: "f32", "f16", "bf16" (or a numpy/torch
    dtype); default the checkpoint's (bf16 for synthetic).
    progress(done_bytes, total_bytes) is called while loading."""

    def __init__(self, source=None, *, synthetic=None, context=None, contexts=None, dtype=None,
                 seed=0, progress=None):
        mlib = _capi.load_model_lib()
        if (source is None) == (synthetic is None):
            raise ValueError("gllmk.Model: give a model directory or a synthetic name")
        path = None
        if source is not None:
            if os.path.isdir(source) or os.sep in str(source) or str(source) not in SYNTHETIC:
                path = os.fspath(source)
            else:
                synthetic = source
        if context is not None and contexts is not None:
            raise ValueError("gllmk.Model: give context or contexts, not both")
        self.contexts = list(contexts) if contexts is not None else \
            [context if context is not None else Context()]
        if not self.contexts:
            raise ValueError("gllmk.Model: contexts is empty")
        self.context = self.contexts[0]
        self._handle = None
        self._sessions = weakref.WeakSet()
        dtype = _dtype_name(dtype)
        if dtype is None:
            dtype_id = _capi.DTYPE_ID["bf16"] if synthetic else -1
        else:
            dtype_id = _capi.DTYPE_ID[dtype]
        callback = _capi.PROGRESS(lambda _data, done, total: progress(done, total)) \
            if progress else _capi.PROGRESS()
        options = _capi.ModelLoadOptions(
            struct_size=C.sizeof(_capi.ModelLoadOptions), path=path and path.encode(),
            synthetic=synthetic and synthetic.encode(), seed=seed, dtype=dtype_id,
            progress=callback)
        handle = C.c_void_p()
        for ctx in self.contexts:
            ctx._check_open()
        ranks = (C.c_void_p * len(self.contexts))(*[ctx._handle for ctx in self.contexts])
        with contextlib.ExitStack() as held:
            for ctx in self.contexts:
                held.enter_context(ctx._lock)
            check(mlib.gllmk_model_load_parallel(ranks, len(self.contexts), C.byref(options),
                                                 C.byref(handle)))
        self._lib, self._handle = mlib, handle
        info = _capi.ModelInfo()
        check(mlib.gllmk_model_get_info(handle, C.byref(info)))
        self.info = {name: getattr(info, name) for name, _ in _capi.ModelInfo._fields_}
        self.info["model_type"] = info.model_type.decode()
        self.info["arch"] = _ARCH[info.arch] if info.arch < len(_ARCH) else info.arch
        self.info["dtype"] = _capi.DTYPES[info.dtype]
        self.vocab = info.vocab

    def session(self, **options):
        """A Session (KV cache and scratch): cache_tokens, cache_bytes,
        block_size, max_sequences, max_batch_tokens (0 = the library's default)."""
        return Session(self, **options)

    def generate(self, prompt_ids, max_new=32, *, temperature=0.0, top_k=0, top_p=1.0,
                 min_p=0.0, seed=0, stop=()):
        """Yields up to max_new token ids after the prompt (a sequence of ints),
        stopping after a token in `stop`. Temperature 0 is greedy."""
        prompt = [int(t) for t in prompt_ids]
        if not prompt or max_new < 1:
            raise ValueError("gllmk.Model.generate: an empty prompt or max_new < 1")
        total = -(-(len(prompt) + max_new) // 16) * 16
        sampling = dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, seed=seed)
        session = self.session(cache_tokens=total, block_size=16, max_sequences=1)
        try:
            seq = session.add()
            limit = session.stats()["max_batch_tokens"]
            for start in range(0, len(prompt), limit):
                last = start + limit >= len(prompt)
                tokens = session.forward({seq: prompt[start:start + limit]}, sampling, tokens=last)
            token = tokens[0]
            for step in range(max_new):
                yield token
                if step + 1 == max_new or token in stop:
                    break
                token = session.forward({seq: [token]}, sampling)[0]
        finally:
            session.close()

    def close(self):
        """Frees the weights (closing the model's sessions first)."""
        if self._handle is None:
            return
        for session in list(self._sessions):
            session.close()
        handle, self._handle = self._handle, None
        if self.context._handle is not None:
            self._lib.gllmk_model_free(handle)

    def __repr__(self):
        return "<gllmk.Model %s %s, %d layers, vocab %d on %s>" % (
            self.info["model_type"], self.info["dtype"], self.info["layers"], self.vocab,
            self.context.backend)


class Session(_capi.Closable):
    """A paged KV cache and the working memory of forward passes (see
    Model.session). Sequences are ints from add()."""

    def __init__(self, model, *, cache_tokens=0, cache_bytes=0, block_size=0, max_sequences=0,
                 max_batch_tokens=0):
        if model._handle is None:
            raise Error(_capi.INVALID_ARGUMENT, "gllmk: the model is closed")
        self.model = model
        self.context = model.context
        self._lib = model._lib
        self._handle = None
        self._epoch = 0  # forwards so far: logits views of older ones are stale
        options = _capi.SessionOptions(
            struct_size=C.sizeof(_capi.SessionOptions), cache_tokens=cache_tokens,
            cache_bytes=cache_bytes, block_size=block_size, max_sequences=max_sequences,
            max_batch_tokens=max_batch_tokens)
        handle = C.c_void_p()
        with self.context._lock:
            check(self._lib.gllmk_session_create(model._handle, C.byref(options), C.byref(handle)))
        self._handle = handle
        model._sessions.add(self)

    def _call(self, name, *args):
        if self._handle is None:
            raise Error(_capi.INVALID_ARGUMENT, "gllmk: the session is closed")
        with self.context._lock:
            check(getattr(self._lib, name)(self._handle, *args))

    def add(self):
        """A new, empty sequence: its id."""
        seq = C.c_uint32()
        self._call("gllmk_session_seq_add", C.byref(seq))
        return seq.value

    def free(self, seq):
        """Frees a sequence and its cache blocks."""
        self._call("gllmk_session_seq_free", seq)

    def length(self, seq):
        """Tokens of the sequence in the cache."""
        n = C.c_uint32()
        self._call("gllmk_session_seq_length", seq, C.byref(n))
        return n.value

    def reserve(self, seq, length):
        self._call("gllmk_session_seq_reserve", seq, length)

    def stats(self):
        s = _capi.SessionStats()
        self._call("gllmk_session_get_stats", C.byref(s))
        return {name: getattr(s, name) for name, _ in _capi.SessionStats._fields_}

    def decode(self, inputs, steps, sampling=None):
        """`steps` decode steps back to back, each step's tokens fed to the
        next on the device (gllmk_session_decode): the same tokens as
        `steps` forwards fed their own, without a round trip a step.

        inputs: {seq: last token id} or [(seq, last token id), ...];
        sampling as in forward. Returns each input's `steps` new tokens
        (a list of lists, in the inputs' order)."""
        items = list(inputs.items()) if isinstance(inputs, dict) else list(inputs)
        count = len(items)
        ids = (C.c_int32 * max(1, count))(*[int(t) for _, t in items])
        seq_inputs = (_capi.SeqInput * max(1, count))()
        for i, (seq, _) in enumerate(items):
            seq_inputs[i] = _capi.SeqInput(int(seq), 1, C.cast(C.byref(ids, 4 * i), C.POINTER(C.c_int32)))
        out = (C.c_int32 * max(1, count * int(steps)))()
        self._epoch += 1
        self._call("gllmk_session_decode", seq_inputs, count, self._samplings(sampling, count),
                   int(steps), out)
        return [[out[step * count + i] for step in range(int(steps))] for i in range(count)]

    def _samplings(self, sampling, count):
        if sampling is None:
            return None
        each = sampling if isinstance(sampling, (list, tuple)) else [sampling] * count
        return (_capi.Sampling * max(1, count))(*[_sampling(**s) for s in each])

    def forward(self, inputs, sampling=None, *, tokens=True, logits=False):
        """Runs the new tokens of distinct sequences through the model.

        inputs: {seq: token ids} or [(seq, token ids), ...]. sampling: None
        (greedy), one dict (temperature, top_k, top_p, min_p, seed) for all,
        or a list of them, one per input. Returns the next token of each
        sequence (a list; None with tokens=False, which skips the transfer),
        or (tokens, logits) with logits=True: a gllmk.Tensor [count, vocab]
        of the model's dtype on the device, valid until the next forward
        (.numpy() copies it; torch.from_dlpack views it on cpu and cuda)."""
        items = list(inputs.items()) if isinstance(inputs, dict) else list(inputs)
        count = len(items)
        seq_inputs = (_capi.SeqInput * max(1, count))()
        keep = []
        for i, (seq, ids) in enumerate(items):
            ids = [int(t) for t in ids]
            array = (C.c_int32 * max(1, len(ids)))(*ids)
            keep.append(array)
            seq_inputs[i] = _capi.SeqInput(int(seq), len(ids), array)
        samplings = self._samplings(sampling, count)
        out_tokens = (C.c_int32 * max(1, count))() if tokens else None
        out_logits = _capi.Tensor() if logits else None
        self._epoch += 1
        self._call("gllmk_session_forward", seq_inputs, count, samplings,
                   C.byref(out_logits) if logits else None, out_tokens)
        result = list(out_tokens[:count]) if tokens else None
        if not logits:
            return result
        epoch = self._epoch
        stale = "gllmk: these logits are from an earlier forward (a logits tensor is valid " \
                "until the next forward on its session)"
        view = Tensor(self.context, self, out_logits,
                      valid=lambda: None if self._epoch == epoch and self._handle else stale)
        return result, view

    def close(self):
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        self.model._sessions.discard(self)
        if self.context._handle is not None:
            self._lib.gllmk_session_destroy(handle)
