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

import torch

from torch_peer import Gllmk, paged_decode_args


def probe(g, b, length, calls):
    args, _, _ = paged_decode_args(g, b, length, hq=32, hkv=8, d=128)
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
