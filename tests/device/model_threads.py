#!/usr/bin/env python3
"""model_threads.py LIBDIR - models on 4 threads at once, each with its own
cuda context (tests/model.c's `threads` case), in steps that narrow down a
crash: contexts and ops only, model load/free, a session's prefill, decode
(recordings). Each step runs in its own process with faulthandler on, so a
segfault prints every thread's Python stack (the gllmk call that crashed)."""
import subprocess
import sys

STEPS = ["ops-pinned", "ops", "load", "prefill", "decode"]

CHILD = r'''
import faulthandler, sys, threading
faulthandler.enable()
sys.path.insert(0, "tools/python")
import numpy as np, gllmk
gllmk.load(sys.argv[1])
step = sys.argv[2]
# ops-pinned: one more context stays open on the main thread for the whole
# run, so the plugin and the device's primary context are never released.
pinned = gllmk.Context(backend="cuda") if step == "ops-pinned" else None

def work(results, i):
    for rep in range(5):
        ctx = gllmk.Context(backend="cuda")
        if step.startswith("ops"):
            x = np.ones(4096, np.float32)
            for _ in range(20):
                x = ctx.add(x, x)
        else:
            model = gllmk.Model(synthetic="tiny", context=ctx, seed=3)
            if step != "load":
                s = gllmk.Session(model, cache_tokens=64)
                seq = s.add()
                tok = s.forward([(seq, [9, 8, 7, 6, 5])])[0]
                if step == "decode":
                    for _ in range(5):
                        tok = s.forward([(seq, [tok])])[0]
                results[i] = tok
            model.close() if hasattr(model, "close") else None
        ctx.close() if hasattr(ctx, "close") else None

results = [None] * 4
threads = [threading.Thread(target=work, args=(results, i)) for i in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print("results", results)
'''


def main():
    libdir = sys.argv[1]
    status = 0
    for step in STEPS:
        r = subprocess.run([sys.executable, "-c", CHILD, libdir, step], capture_output=True,
                           text=True, timeout=300)
        print(f"== {step}: exit {r.returncode}")
        if r.returncode != 0:
            status = 1
            print(r.stdout[-2000:], r.stderr[-6000:])
    sys.exit(status)


if __name__ == "__main__":
    main()
