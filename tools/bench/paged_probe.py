#!/usr/bin/env python3
"""paged_probe.py - a few paged_attention decode calls per shape, for a profiler.

Each shape (B sequences decoding one token after L cached tokens, Llama-3-8B
heads: 32 query / 8 kv heads of 128, bf16, blocks of 16 in a shuffled cache)
is called `--calls` times, so that `ncu --kernel-name regex:attention` sees
a handful of launches per shape instead of gllmk-bench's thousands. Prints
nothing else: gllmk-bench times the same shapes.

usage: paged_probe.py [--build DIR] [--calls N] B:L ...
"""
import argparse
import ctypes
import math

import torch

from torch_peer import Gllmk, PagedArgs


def probe(g, b, length, calls):
    hq, hkv, d, bs = 32, 8, 128, 16
    blocks = b * length // bs
    bf = torch.bfloat16
    kc, vc = (torch.randn(blocks, bs, hkv, d, dtype=bf) for _ in range(2))
    table = torch.randperm(blocks, dtype=torch.int32).reshape(b, length // bs)
    tensors = [g.tensor(x) for x in (torch.zeros(b, hq, d, dtype=bf), torch.randn(b, hq, d, dtype=bf), kc, vc,
                                      table, torch.arange(b + 1, dtype=torch.int32),
                                      torch.full((b,), length, dtype=torch.int32))]
    args = PagedArgs(*(ctypes.pointer(t) for t in tensors), 1.0 / math.sqrt(d))
    op = g.op_ids["paged_attention"]
    for _ in range(calls):
        g.check(g.lib.gllmk_op_run(g.ctx, op, ctypes.byref(args), ctypes.sizeof(args)), "paged_attention")
    g.check(g.lib.gllmk_synchronize(g.ctx), "synchronize")
    print(f"paged_attention B={b} L={length}: {calls} calls")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--calls", type=int, default=2)
    ap.add_argument("shapes", nargs="+", help="B:L")
    a = ap.parse_args()
    torch.manual_seed(0)
    g = Gllmk(a.build)
    g.create()
    for shape in a.shapes:
        b, length = (int(x) for x in shape.split(":"))
        probe(g, b, length, a.calls)
    g.destroy()


if __name__ == "__main__":
    main()
