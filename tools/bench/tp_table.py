#!/usr/bin/env python3
"""tp_table.py DIR [DEGREES] - the tensor-parallel table of tools/device-check.sh
tp: gllmk-generate's JSON reports tp{N}-b{1,32}.json in DIR side by side for
each degree N of DEGREES (default "1 2"): decode tokens/s, the speed-up of
--tp N over --tp 1, decode against the
weight-bytes limit (every GPU's copy bandwidth), prefill, and the all-reduce
time per decode step."""
import json
import os
import sys


def load(directory, tp, batch):
    path = os.path.join(directory, f"tp{tp}-b{batch}.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"{path}: {e}")
        return None


def main():
    directory = sys.argv[1]
    degrees = [int(d) for d in (sys.argv[2] if len(sys.argv) > 2 else "1 2").split()]
    print("llama3-8b (synthetic, bf16), 1024-token prompt, 256 decode steps (the first records the step)")
    print(f"{'batch':>5} {'tp':>3} {'decode tok/s':>13} {'vs tp=1':>8} {'% limit':>8} "
          f"{'prefill tok/s':>14} {'all-reduce us':>14} {'per step ms':>12} {'recorded':>9}")
    print("(all-reduce us: one [batch, 4096] bf16 all-reduce called from the host; per step ms: "
          "a step's 64 of them recorded and replayed)")
    ok = True
    for batch in (1, 32):
        base = load(directory, 1, batch)
        for tp in degrees:
            r = load(directory, tp, batch)
            if r is None or base is None:
                ok = False
                continue
            speedup = r["decode_tokens_per_s"] / base["decode_tokens_per_s"]
            ar = r.get("all_reduce_us")
            recorded = r.get("step_all_reduce_ms")
            per_step = f"{recorded:.3f}" if recorded else "-"
            print(f"{batch:>5} {tp:>3} {r['decode_tokens_per_s']:>13.1f} {speedup:>7.2f}x "
                  f"{r['decode_pct_of_limit']:>7.1f}% {r['prefill_tokens_per_s']:>14.0f} "
                  f"{(f'{ar:.1f}' if ar else '-'):>14} {per_step:>12} "
                  f"{'yes' if r.get('decode_recordings') else 'NO':>9}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
