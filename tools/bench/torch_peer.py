#!/usr/bin/env python3
"""torch_peer.py - gllmk on the GPU side by side with PyTorch.

Two tables, both on the same GPU in the same run:

1. Every row of `gllmk-bench --backend cuda --json`, with the same op at the
   same shape and dtype in PyTorch (torch.matmul, F.scaled_dot_product_attention,
   eager norms and activations), timed with CUDA events (median).
2. The issue's targets at their own shapes (matmul 4096^3 and 8192^3, GEMV
   N = 14336 and 128256, attention prefill S = 4096, paged decode of 32 x
   4096 tokens), ours timed through libgllmk's public API (ctypes) and
   checked against PyTorch; plus the device copy ceiling and the time to
   create a gllmk context once the driver is initialised.

Ratio = PyTorch time / gllmk time (above 1: gllmk is faster).

usage: torch_peer.py [--build DIR] [--json FILE] [--skip-bench] [--skip-targets]
                     [--quick] [--bench-json FILE]
"""
import argparse
import ctypes
import itertools
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from bench_shapes import attention_shape

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
GLLMK_DTYPE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.int32: 3}
DEV = "cuda"


def cuda_time(fn, warmup=3, reps=20):
    """Median seconds of fn() measured with CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def rand(shape, dtype, lo=-1.0, hi=1.0):
    return (torch.rand(shape, device=DEV, dtype=torch.float32) * (hi - lo) + lo).to(dtype)


# ------------------------------------------------------------ peers of rows


def ints(text):
    return [int(x) for x in re.findall(r"\d+", text)]


def shape_dims(text):
    m = re.search(r"\[([\d, ]+)\]", text)
    return [int(x) for x in m.group(1).split(",")] if m else []


def rope_ref(x, pos, theta=500000.0):
    """NeoX rotary embedding over the whole head dim, eager PyTorch."""
    d = x.shape[-1]
    inv = theta ** (-torch.arange(0, d, 2, device=DEV, dtype=torch.float32) / d)
    ang = pos.float()[:, None] * inv[None, :]
    cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
    x0, x1 = x[..., : d // 2].float(), x[..., d // 2 :].float()
    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).to(x.dtype)


def sample_ref(logits, temperature=0.8, top_k=50, top_p=0.9):
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    vals, idx = probs.topk(top_k, dim=-1)
    keep = vals.cumsum(-1) - vals < top_p
    vals = vals * keep
    return idx.gather(-1, torch.multinomial(vals, 1))


def peer_for(row):
    """A zero-argument callable doing the row's work in PyTorch, or None."""
    name, dtype_text, shape = row["name"], row["dtype"], row["shape"]
    parts = dtype_text.split(">")
    dt = DTYPES.get(parts[0])
    if name == "buffer_copy":
        n = ints(shape)[0] << 20
        a, b = torch.empty(n, dtype=torch.uint8, device=DEV), torch.empty(n, dtype=torch.uint8, device=DEV)
        return lambda: b.copy_(a)
    if dt is None:
        return None
    dims = shape_dims(shape)
    if name in ("copy", "cast"):
        out_dt = DTYPES[parts[1]] if len(parts) > 1 else dt
        src, out = rand(dims, dt), torch.empty(dims, dtype=out_dt, device=DEV)
        return lambda: out.copy_(src)
    if name in ("add", "mul", "mul_add", "silu", "gelu", "add_gelu", "swiglu", "softmax"):
        a, b, c = rand(dims, dt), rand(dims, dt), rand(dims, dt)
        bias = rand(dims[-1:], dt)
        return {
            "add": lambda: torch.add(a, b),
            "mul": lambda: torch.mul(a, b),
            "mul_add": lambda: torch.addcmul(c, a, b),
            "silu": lambda: F.silu(a),
            "gelu": lambda: F.gelu(a),
            "add_gelu": lambda: F.gelu(a + bias),
            "swiglu": lambda: F.silu(a) * b,
            "softmax": lambda: torch.softmax(a, dim=-1),
        }[name]
    if name in ("rmsnorm", "add_rmsnorm", "layernorm"):
        x, r = rand(dims, dt), rand(dims, dt)
        w, bias = rand(dims[-1:], dt, 0.5, 1.5), rand(dims[-1:], dt)
        if name == "rmsnorm":
            return lambda: F.rms_norm(x, dims[-1:], w, 1e-5)
        if name == "layernorm":
            return lambda: F.layer_norm(x, dims[-1:], w, bias, 1e-5)
        return lambda: F.rms_norm(r.add_(x), dims[-1:], w, 1e-5)
    if name == "rope":
        x, pos = rand(dims, dt), torch.arange(dims[0], device=DEV, dtype=torch.int32)
        return lambda: rope_ref(x, pos)
    if name == "embedding":
        n_ids, vocab, dim = ints(shape)[:3]
        table, ids = rand([vocab, dim], dt), torch.randint(0, vocab, (n_ids,), device=DEV)
        return lambda: F.embedding(ids, table)
    if name == "kv_append":
        t, h, d, bs = ints(shape)[:4]
        k, v = rand([t, h, d], dt), rand([t, h, d], dt)
        kc = torch.empty([t, h, d], dtype=dt, device=DEV)
        vc = torch.empty([t, h, d], dtype=dt, device=DEV)
        slots = torch.randperm(t, device=DEV)
        return lambda: (kc.index_copy_(0, slots, k), vc.index_copy_(0, slots, v))
    if name in ("matmul", "gemv", "matmul/decode", "matmul/prefill"):
        m, n, k = ints(shape)[:3]
        a, b = rand([m, k], dt), rand([n, k], dt)
        return lambda: torch.matmul(a, b.t())
    if name == "attention/prefill":
        b, s, hq, hkv, d, causal = attention_shape(shape)
        q, k, v = rand([b, hq, s, d], dt), rand([b, hkv, s, d], dt), rand([b, hkv, s, d], dt)
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    if name == "paged_attn/decode":
        b, length, hq, hkv, d = ints(shape)[:5]
        q, k, v = rand([b, hq, 1, d], dt), rand([b, hkv, length, d], dt), rand([b, hkv, length, d], dt)
        return lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    if name in ("argmax", "sample"):
        logits = rand(dims, dt, -8, 8)
        return (lambda: torch.argmax(logits, dim=-1)) if name == "argmax" else (lambda: sample_ref(logits))
    return None


def op_rows(rows):
    """The per-op rows (the recordings row has no PyTorch peer)."""
    return [r for r in rows if "name" in r]


def bench_rows(build, quick, bench_json):
    if bench_json:  # rows of an earlier `gllmk-bench --backend cuda --json` run
        with open(bench_json) as f:
            return op_rows(json.load(f))
    exe = os.path.join(build, "bin", "gllmk-bench")
    if not os.path.exists(exe):
        print(f"torch_peer: {exe} not found; skipping the gllmk-bench rows", file=sys.stderr)
        return []
    cmd = [exe, "--backend", "cuda", "--json"] + (["--quick"] if quick else [])
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        print(f"torch_peer: {' '.join(cmd)} exited {done.returncode}:\n{done.stderr}", file=sys.stderr)
    try:
        return op_rows(json.loads(done.stdout))
    except json.JSONDecodeError:
        print(f"torch_peer: gllmk-bench printed no JSON:\n{done.stdout[-2000:]}", file=sys.stderr)
        return []


# ------------------------------------------------------ gllmk through ctypes


class Tensor(ctypes.Structure):
    _fields_ = [("buffer", ctypes.c_void_p), ("offset", ctypes.c_uint64), ("dtype", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("shape", ctypes.c_int64 * 8), ("strides", ctypes.c_int64 * 8)]


class ContextOptions(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_char_p), ("device_index", ctypes.c_uint32), ("num_threads", ctypes.c_uint32),
                ("exclude", ctypes.c_void_p), ("exclude_count", ctypes.c_uint32), ("plugin_dir", ctypes.c_char_p),
                ("queue", ctypes.c_void_p)]


TP = ctypes.POINTER(Tensor)


class MatmulArgs(ctypes.Structure):
    _fields_ = [("out", TP), ("a", TP), ("b", TP), ("bias", TP), ("alpha", ctypes.c_float),
                ("beta", ctypes.c_float), ("b_layout", ctypes.c_int32)]


class AttentionArgs(ctypes.Structure):
    _fields_ = [("out", TP), ("q", TP), ("k", TP), ("v", TP), ("kv_lens", TP), ("lse", TP),
                ("scale", ctypes.c_float), ("causal", ctypes.c_int32)]


class PagedArgs(ctypes.Structure):
    _fields_ = [("out", TP), ("q", TP), ("k_cache", TP), ("v_cache", TP), ("block_table", TP),
                ("q_starts", TP), ("seq_lens", TP), ("scale", ctypes.c_float)]


class CopyArgs(ctypes.Structure):
    _fields_ = [("out", TP), ("src", TP)]


class Gllmk:
    """The few calls of libgllmk's public API this script needs."""

    def __init__(self, build):
        self.lib = ctypes.CDLL(os.path.join(build, "lib", "libgllmk.so.0"))
        self.lib.gllmk_last_error.restype = ctypes.c_char_p
        self.lib.gllmk_status_string.restype = ctypes.c_char_p
        self.lib.gllmk_op_name.restype = ctypes.c_char_p
        self.lib.gllmk_op_run.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
        # Ops are called through gllmk_op_run with their id and struct size
        # (the gllmk_<op> functions are inline in the header).
        self.op_ids = {}
        while self.lib.gllmk_op_name(len(self.op_ids)):
            self.op_ids[self.lib.gllmk_op_name(len(self.op_ids)).decode()] = len(self.op_ids)
        self.ctx = ctypes.c_void_p()
        self.buffers = []

    def check(self, status, what):
        if status != 0:
            raise RuntimeError(f"{what}: {self.lib.gllmk_status_string(status).decode()}: "
                               f"{self.lib.gllmk_last_error().decode()}")

    def create(self):
        opts = ContextOptions(backend=b"cuda")
        start = time.perf_counter()
        self.check(self.lib.gllmk_context_create_ex(ctypes.byref(opts), ctypes.sizeof(opts), ctypes.byref(self.ctx)),
                   "context_create")
        return time.perf_counter() - start

    def destroy(self):
        self.lib.gllmk_context_destroy(self.ctx)
        self.buffers = []

    def tensor(self, host):
        """A gllmk tensor holding a copy of the torch tensor `host`."""
        host = host.contiguous().cpu()
        raw = host.view(torch.uint8) if host.element_size() == 1 else host.view(
            {1: torch.uint8, 2: torch.int16, 4: torch.int32}[host.element_size()])
        data = raw.numpy().tobytes()
        buf = ctypes.c_void_p()
        self.check(self.lib.gllmk_buffer_alloc(self.ctx, ctypes.c_uint64(len(data)), ctypes.byref(buf)), "alloc")
        self.buffers.append(buf)
        self.check(self.lib.gllmk_buffer_write(buf, ctypes.c_uint64(0), data, ctypes.c_uint64(len(data))), "write")
        t = Tensor()
        shape = (ctypes.c_int64 * 8)(*host.shape)
        self.check(self.lib.gllmk_tensor_make(buf, ctypes.c_uint64(0), GLLMK_DTYPE[host.dtype], host.dim(), shape,
                                              ctypes.byref(t)), "tensor_make")
        t.torch_dtype, t.torch_shape, t.nbytes = host.dtype, list(host.shape), len(data)
        return t

    def read(self, t):
        raw = ctypes.create_string_buffer(t.nbytes)
        self.check(self.lib.gllmk_buffer_read(ctypes.c_void_p(t.buffer), ctypes.c_uint64(t.offset), raw,
                                              ctypes.c_uint64(t.nbytes)), "read")
        itemsize = torch.empty(0, dtype=t.torch_dtype).element_size()
        ints_ = torch.frombuffer(bytearray(raw.raw), dtype={2: torch.int16, 4: torch.int32}[itemsize])
        return ints_.view(t.torch_dtype).reshape(t.torch_shape)

    def time(self, op, args, reps=20):
        """Median seconds per call, from batches of calls between synchronizations."""
        op_id = self.op_ids[op]
        call = lambda: self.check(self.lib.gllmk_op_run(self.ctx, op_id, ctypes.byref(args), ctypes.sizeof(args)), op)
        for _ in range(3):
            call()
        self.check(self.lib.gllmk_synchronize(self.ctx), "synchronize")
        batch, times = 5, []
        for _ in range(max(3, reps // batch)):
            start = time.perf_counter()
            for _ in range(batch):
                call()
            self.check(self.lib.gllmk_synchronize(self.ctx), "synchronize")
            times.append((time.perf_counter() - start) / batch)
        return statistics.median(times)


def rel_error(ours, ref):
    ours, ref = ours.double().cpu(), ref.double().cpu()
    if torch.isnan(ours).any():
        return float("nan")
    return ((ours - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def paged_decode_args(g, b, length, hq, hkv, d, bs=16):
    """paged_attention's arguments for b bf16 sequences decoding one token
    after `length` cached ones, blocks of `bs` keys in a shuffled cache: the
    args, the output tensor and the host q, k cache, v cache and block table."""
    bf = torch.bfloat16
    blocks = b * length // bs
    kc, vc = (torch.randn(blocks, bs, hkv, d, dtype=bf) for _ in range(2))
    table = torch.randperm(blocks, dtype=torch.int32).reshape(b, length // bs)
    q = torch.randn(b, hq, d, dtype=bf)
    starts = torch.arange(b + 1, dtype=torch.int32)
    lens = torch.full((b,), length, dtype=torch.int32)
    tq, tkc, tvc, tt, ts, tl = (g.tensor(x) for x in (q, kc, vc, table, starts, lens))
    to = g.tensor(torch.zeros(b, hq, d, dtype=bf))
    args = PagedArgs(out=ctypes.pointer(to), q=ctypes.pointer(tq), k_cache=ctypes.pointer(tkc),
                     v_cache=ctypes.pointer(tvc), block_table=ctypes.pointer(tt), q_starts=ctypes.pointer(ts),
                     seq_lens=ctypes.pointer(tl), scale=1.0 / math.sqrt(d))
    return args, to, (q, kc, vc, table)


def target_rows(g, quick):
    """(label, shape, our seconds, torch seconds, bytes, flops, rel error) for the issue's targets."""
    rows = []
    bf = torch.bfloat16

    def matmul(m, n, k):
        a, b = torch.randn(m, k, dtype=bf), torch.randn(n, k, dtype=bf)
        ta, tb, to = g.tensor(a), g.tensor(b), g.tensor(torch.zeros(m, n, dtype=bf))
        args = MatmulArgs(out=ctypes.pointer(to), a=ctypes.pointer(ta), b=ctypes.pointer(tb), alpha=1.0, beta=0.0,
                          b_layout=0)
        ours = g.time("matmul", args)
        ref = torch.matmul(a.to(DEV).float(), b.to(DEV).float().t())
        err = rel_error(g.read(to), ref)
        da, db = a.to(DEV), b.to(DEV)
        peer = cuda_time(lambda: torch.matmul(da, db.t()))
        label = "gemv" if m == 1 else "matmul"
        rows.append((label, f"M={m} N={n} K={k} bf16", ours, peer, 2 * (m * k + n * k + m * n), 2 * m * n * k, err))

    matmul(1, 14336, 4096)
    matmul(1, 128256, 4096)
    matmul(4096, 4096, 4096)
    if not quick:
        matmul(8192, 8192, 8192)

    # Attention prefill: Llama-3-8B heads, causal.
    s, hq, hkv, d = (1024 if quick else 4096), 32, 8, 128
    q, k, v = (torch.randn(1, s, h, d, dtype=bf) for h in (hq, hkv, hkv))
    tq, tk, tv, to = g.tensor(q), g.tensor(k), g.tensor(v), g.tensor(torch.zeros(1, s, hq, d, dtype=bf))
    args = AttentionArgs(out=ctypes.pointer(to), q=ctypes.pointer(tq), k=ctypes.pointer(tk), v=ctypes.pointer(tv),
                         scale=1.0 / math.sqrt(d), causal=1)
    ours = g.time("attention", args, reps=10)
    dq, dk, dv = (x.to(DEV).transpose(1, 2) for x in (q, k, v))
    ref = F.scaled_dot_product_attention(dq.float(), dk.float(), dv.float(), is_causal=True, enable_gqa=True)
    err = rel_error(g.read(to), ref.transpose(1, 2))
    peer = cuda_time(lambda: F.scaled_dot_product_attention(dq, dk, dv, is_causal=True, enable_gqa=True))
    flops = 4 * s * s * d * hq / 2
    rows.append(("attention", f"S={s} H={hq}/{hkv} D={d} causal bf16", ours, peer, 2 * 4 * s * hq * d, flops, err))

    # Paged decode: 32 sequences of 4096 tokens.
    b, length = 32, 4096
    args, to, (q, kc, vc, table) = paged_decode_args(g, b, length, hq, hkv, d)
    ours = g.time("paged_attention", args)
    gather = lambda c: c.to(DEV)[table.to(DEV).long()].reshape(b, length, hkv, d).transpose(1, 2)
    dk, dv = gather(kc), gather(vc)
    dq = q.to(DEV).unsqueeze(2)
    ref = F.scaled_dot_product_attention(dq.float(), dk.float(), dv.float(), enable_gqa=True)
    err = rel_error(g.read(to), ref.squeeze(2))
    peer = cuda_time(lambda: F.scaled_dot_product_attention(dq, dk, dv, enable_gqa=True))
    kv_bytes = 2 * b * length * hkv * d * 2
    rows.append(("paged_attention", f"B={b} L={length} H={hq}/{hkv} D={d} bf16", ours, peer, kv_bytes, 0, err))

    rows.append(copy_row(g))
    return rows


def copy_row(g):
    """The bandwidth ceiling and a bandwidth-bound op of ours, 1 GiB each way."""
    n, bf = 1 << 28, torch.bfloat16
    src = g.tensor(torch.randn(n, dtype=bf))
    dst = g.tensor(torch.zeros(n, dtype=bf))
    ours = g.time("copy", CopyArgs(out=ctypes.pointer(dst), src=ctypes.pointer(src)))
    a, c = torch.empty(n, dtype=bf, device=DEV), torch.empty(n, dtype=bf, device=DEV)
    peer = cuda_time(lambda: c.copy_(a))
    return ("copy", f"[{n}] bf16", ours, peer, 4 * n, 0, 0.0)


# ------------------------------------------------------------------- output


def fmt_time(s):
    if s is None or not math.isfinite(s):
        return "-"
    return f"{s * 1e3:9.3f} ms" if s >= 1e-3 else f"{s * 1e6:9.1f} us"


def print_targets(name, targets, copy_bw, report):
    print(f"\n== targets (issue 4) on {name}; copy ceiling {copy_bw / 1e9:.0f} GB/s (torch copy_, read + write)")
    print(f"{'op':16} {'shape':36} {'gllmk':>12} {'torch':>12} {'ratio':>6} {'gllmk rate':>24} {'rel err':>9}")
    for label, shape, ours, peer, nbytes, flops, err in targets:
        rate = f"{flops / ours / 1e12:7.1f} TFLOP/s" if flops and label != "gemv" else \
            f"{nbytes / ours / 1e9:6.0f} GB/s {nbytes / ours / copy_bw:4.0%}"
        print(f"{label:16} {shape:36} {fmt_time(ours):>12} {fmt_time(peer):>12} {peer / ours:6.2f} {rate:>24} "
              f"{err:9.2e}")
        report["targets"].append({"op": label, "shape": shape, "time_s": ours, "torch_time_s": peer,
                                  "bytes": nbytes, "flops": flops, "rel_error": err})


def rotating_peer(row):
    """peer_for(row) over as many input sets as gllmk-bench rotated through
    for the row (its "sets": each call then finds its inputs out of the L2
    cache), called in turn, so that both sides are timed alike."""
    calls = [peer_for(row) for _ in range(max(1, row.get("sets") or 1))]
    if calls[0] is None:
        return None
    turn = itertools.cycle(calls)
    return lambda: next(turn)()


def print_bench(name, rows, copy_bw, report):
    print(f"\n== gllmk-bench --backend cuda vs PyTorch {torch.__version__} on {name}")
    print(f"{'op':20} {'dtype':9} {'shape':34} {'gllmk':>12} {'torch':>12} {'ratio':>6}  gllmk GB/s, TFLOP/s")
    for row in rows:
        ours = row.get("time_s")
        peer_fn = rotating_peer(row) if row.get("status") == "ok" else None
        try:
            peer = cuda_time(peer_fn) if peer_fn else None
        except (RuntimeError, TypeError) as e:  # an op PyTorch lacks at that dtype
            print(f"torch_peer: {row['name']} {row['dtype']}: {e}", file=sys.stderr)
            peer = None
        ratio = peer / ours if peer and ours else None
        extra = ""
        if row.get("gb_per_s"):
            extra += f"{row['gb_per_s']:8.1f} GB/s ({row['gb_per_s'] * 1e9 / copy_bw:4.0%} of copy)"
        if row.get("gflop_per_s"):
            extra += f" {row['gflop_per_s'] / 1e3:7.1f} TFLOP/s"
        status = "" if row.get("status") == "ok" else f" [{row.get('status')}: {row.get('message')}]"
        print(f"{row['name']:20} {row['dtype']:9} {row['shape'][:34]:34} {fmt_time(ours):>12} {fmt_time(peer):>12} "
              f"{(f'{ratio:5.2f}' if ratio else '  -  '):>6}  {extra}{status}")
        report["bench"].append(dict(row, torch_time_s=peer, ratio=ratio))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--skip-bench", action="store_true", help="only the target rows")
    ap.add_argument("--skip-targets", action="store_true", help="of the target rows only the copy ceiling")
    ap.add_argument("--quick", action="store_true", help="gllmk-bench --quick and smaller target shapes")
    ap.add_argument("--bench-json", help="take the gllmk rows from this `gllmk-bench --json` output")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.cuda.init()
    torch.empty(1, device=DEV)  # the primary context now exists: what follows is gllmk's own cost
    name = torch.cuda.get_device_name()
    report = {"device": name, "bench": [], "targets": []}

    g = Gllmk(a.build)
    first = g.create()
    g.destroy()
    second = g.create()
    report["context_create_s"] = {"first": first, "again": second}
    print(f"context creation (driver initialised by PyTorch): first {first * 1e3:.1f} ms, "
          f"again {second * 1e3:.1f} ms")

    targets = [copy_row(g)] if a.skip_targets else target_rows(g, a.quick)
    g.destroy()
    copy_bw = next(r[4] / r[3] for r in targets if r[0] == "copy")  # torch's device copy, bytes / s
    print_targets(name, targets, copy_bw, report)
    if not a.skip_bench:
        print_bench(name, bench_rows(a.build, a.quick, a.bench_json), copy_bw, report)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
