#!/usr/bin/env python3
"""graph_steps.py - where a decode step's time goes inside its CUDA graph.

trace_summary.py times each op of a step alone, call by call, so it counts
every launch and a cold start. This instead decodes through a gllmk.Model
session on cuda (greedy, every sequence after a prompt of --prompt-len
tokens), records --steps steps with CUPTI (torch.profiler) while they replay
as they do in gllmk-generate, and prints per step: the span from its first
kernel to argmax's end, the time between kernels, then each kernel's time
by its role in a layer (the projections come in the order q/k/v, o, gate/up,
down; the one after the last layer is lm_head) and by kernel name. A
kernel's "own" time leaves out what an earlier kernel still covered
(programmatic dependent launch lets the next one start before the last
ends), so the roles' own times add up to the span less the idle time.

Needs PyTorch with CUDA and gllmk's Python package (tools/python, found on
PYTHONPATH; libgllmk as gllmk finds it, e.g. GLLMK_LIBRARY_DIR=build/lib).

usage: graph_steps.py [--model llama3-8b] [--batch 1] [--prompt-len 1024] [--steps 16]
"""
import argparse
import collections
import json
import os
import sys
import tempfile

PROJECTIONS = ("q/k/v", "o", "gate/up", "down")


def is_matmul(name):
    return "gemv" in name or "matmul" in name


def role_of(name, matmuls_before, layers):
    """The kernel's role in the step, from its name and how many matmul
    kernels came before it in the step."""
    if "attention_combine" in name:
        return "attention (split merge)"
    if "attention" in name:
        return "attention"
    if is_matmul(name):
        if matmuls_before < len(PROJECTIONS) * layers:
            return PROJECTIONS[matmuls_before % len(PROJECTIONS)]
        return "lm_head"
    return name


def summarize(kernels, layers, steps):
    """Prints the last `steps` decode steps of `kernels`, (start, end, name)
    in microseconds sorted by start; a step ends with its argmax kernel."""
    ends = [i for i, k in enumerate(kernels) if "argmax" in k[2]]
    if len(ends) < steps + 1:
        print(f"graph_steps: {len(ends)} steps recorded, {steps + 1} needed", file=sys.stderr)
        return 1
    ends = ends[-(steps + 1):]
    span = idle = 0.0
    by_role = collections.defaultdict(lambda: [0, 0.0, 0.0])  # calls, time, own time
    by_name = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for first, last in zip(ends, ends[1:]):
        step = kernels[first + 1:last + 1]
        span += step[-1][1] - step[0][0]
        covered = step[0][0]  # the end of the work so far
        matmuls = 0
        for start, end, name in step:
            idle += max(0.0, start - covered)
            own = max(0.0, end - max(covered, start))
            covered = max(covered, end)
            role = role_of(name, matmuls, layers)
            matmuls += is_matmul(name)
            for table, key in ((by_role, role), (by_name, name)):
                table[key][0] += 1
                table[key][1] += end - start
                table[key][2] += own
    print(f"{steps} steps: {span / steps:.1f} us a step from its first kernel to argmax's end, "
          f"{idle / steps:.1f} us of it between kernels")
    for title, table in (("role", by_role), ("kernel", by_name)):
        print(f"{title:44s} {'calls':>6s} {'us each':>8s} {'own us/step':>12s} {'share':>6s}")
        for key, (calls, time, own) in sorted(table.items(), key=lambda item: -item[1][2]):
            print(f"{key[:44]:44s} {calls / steps:6.1f} {time / calls:8.2f} {own / steps:12.1f} "
                  f"{100.0 * own / span:5.1f}%")
    return 0


def record(args):
    """Decodes and returns the recorded kernels as (start, end, name) and
    the model's layer count."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    import gllmk

    torch.zeros(1, device="cuda")  # PyTorch's own context first
    model = gllmk.Model(synthetic=args.model, context=gllmk.Context("cuda"))
    per_sequence = -(-(args.prompt_len + args.steps + 16) // 16) * 16
    session = model.session(cache_tokens=args.batch * per_sequence, block_size=16,
                            max_sequences=args.batch, max_batch_tokens=args.prompt_len)
    sequences = [session.add() for _ in range(args.batch)]
    tokens = []
    for i, seq in enumerate(sequences):
        prompt = [((j + 13 * i) * 7919) % (model.vocab - 1) + 1 for j in range(args.prompt_len)]
        tokens.append(session.forward({seq: prompt})[0])

    def decode(count):
        nonlocal tokens
        for _ in range(count):
            out = session.forward({seq: [token] for seq, token in zip(sequences, tokens)})
            tokens = [out[i] for i in range(args.batch)]

    decode(4)  # the first steps record the graph
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        decode(args.steps + 2)
        torch.cuda.synchronize()
    layers = model.info["layers"]
    session.close()
    model.close()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    kernels = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in events
                     if e.get("cat") == "kernel" and e.get("ph") == "X")
    return kernels, layers


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="llama3-8b", help="a synthetic model (default llama3-8b)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt-len", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=16)
    args = ap.parse_args()
    if args.batch < 1 or args.prompt_len < 1 or args.steps < 1:
        ap.error("--batch, --prompt-len and --steps must be at least 1")
    kernels, layers = record(args)
    print(f"{args.model}, batch {args.batch}, prompt {args.prompt_len}: decode inside its CUDA graph")
    return summarize(kernels, layers, args.steps)


if __name__ == "__main__":
    sys.exit(main())
