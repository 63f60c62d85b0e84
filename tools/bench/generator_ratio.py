#!/usr/bin/env python3
"""generator_ratio.py DECODE_A PREFILL_A DECODE_B PREFILL_B - issue 23's
backend targets from four `gllmk-generate --json` outputs: backend A's decode
(batch 1) and prefill tokens/s over backend B's, e.g. vulkan against cuda
(targets: decode >= 0.7x, prefill >= 0.35x)."""
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    decode_a, prefill_a, decode_b, prefill_b = (load(p) for p in sys.argv[1:])
    a, b = decode_a["backend"], decode_b["backend"]
    rows = [("decode batch 1", decode_a["decode_tokens_per_s"], decode_b["decode_tokens_per_s"], 0.7),
            ("prefill %d tokens" % prefill_a["prefill_tokens"], prefill_a["prefill_tokens_per_s"],
             prefill_b["prefill_tokens_per_s"], 0.35)]
    print(f"{'':<20} {a:>12} {b:>12}  {a}/{b}  target")
    for name, x, y, target in rows:
        ratio = x / y
        print(f"{name:<20} {x:>12.1f} {y:>12.1f}  {ratio:6.3f}  >= {target} {'met' if ratio >= target else 'NOT met'}")


if __name__ == "__main__":
    main()
