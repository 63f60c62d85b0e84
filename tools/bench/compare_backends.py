#!/usr/bin/env python3
"""compare_backends.py A.json B.json - one row per gllmk-bench case present in
both runs (gllmk-bench --json), with each backend's time and the ratio
time(A) / time(B), e.g. vulkan.json cuda.json -> "vulkan / cuda" speed ratio
as B's time over A's time (1.0 = as fast, 0.5 = half the speed)."""
import json
import sys


def rows(path):
    with open(path) as f:
        return {(r["name"], r["dtype"], r["shape"]): r for r in json.load(f) if "name" in r}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = rows(sys.argv[1]), rows(sys.argv[2])
    a_name = next(iter(a.values()))["backend"] if a else "A"
    b_name = next(iter(b.values()))["backend"] if b else "B"
    print(f"{'op':<20} {'dtype':<9} {'shape':<34} {a_name:>12} {b_name:>12}  speed {a_name}/{b_name}")
    for key, ra in a.items():
        rb = b.get(key)
        if rb is None or not ra.get("time_s") or not rb.get("time_s"):
            continue
        name, dtype, shape = key
        ta, tb = ra["time_s"], rb["time_s"]
        print(f"{name:<20} {dtype:<9} {shape:<34} {ta * 1e6:>10.1f}us {tb * 1e6:>10.1f}us  {tb / ta:6.2f}")


if __name__ == "__main__":
    main()
