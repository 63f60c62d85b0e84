#!/usr/bin/env python3
"""trace_summary.py - where a decode step's device time goes, from a
gllmk-generate --trace file (each op timed alone, call by call).

For the phases named "decode step N" (the first is skipped: it records),
prints per op and shape the calls per step, the mean device time of a call
and the share of the step, then the sum of the ops' device time per step.
Compare that sum with gllmk-generate's replayed step time (1 / decode
tokens/s x batch) to see what launches and gaps cost.

usage: trace_summary.py TRACE.json [--top N]
"""
import argparse
import collections
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=20)
    a = ap.parse_args()
    with open(a.trace) as f:
        events = json.load(f)["traceEvents"]
    ops = [e for e in events if e.get("tid") == 1 and e.get("ph") == "X"]
    steps = sorted({e["args"]["phase"] for e in ops if e["args"].get("phase", "").startswith("decode step")},
                   key=lambda p: int(p.split()[-1]))[1:]
    if not steps:
        print("no decode steps past the first in the trace")
        return 1
    wanted = set(steps)
    total = collections.defaultdict(float)
    calls = collections.Counter()
    for e in ops:
        if e["args"].get("phase") not in wanted:
            continue
        shapes = e["args"].get("shapes", {})
        key = f'{e["name"]} {e["args"].get("dtype", "")} ' + " ".join(
            f"{k}={'x'.join(map(str, v))}" for k, v in sorted(shapes.items()) if k in ("out", "b", "q", "x"))
        total[key] += e["dur"]
        calls[key] += 1
    n = len(steps)
    step_us = sum(total.values()) / n
    print(f"{n} decode steps; ops' device time per step {step_us / 1e3:.3f} ms, "
          f"{sum(calls.values()) / n:.0f} calls per step")
    print(f"{'op':70s} {'calls':>6s} {'us/call':>9s} {'share':>6s}")
    for key, us in sorted(total.items(), key=lambda kv: -kv[1])[:a.top]:
        print(f"{key[:70]:70s} {calls[key] / n:6.0f} {us / calls[key]:9.2f} {us / n / step_us:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
