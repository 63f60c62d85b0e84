#!/usr/bin/python3
"""render_trace.py - draws one phase of a gllmk Chrome trace as a PNG, the
way a trace viewer shows it: the phase on top, then each op as a slice on
its context's track, coloured by op, with the time per op kind listed.

usage: render_trace.py TRACE.json OUT.png [--phase NAME]
  --phase  the phase to draw (gllmk-generate: "prefill", "decode step N");
           default: the last "decode step" in the file

Made for docs/images/trace-decode.png from
  gllmk-generate --synthetic tiny --backend cpu --max-new 2 --trace t.json
Needs matplotlib (Debian: python3-matplotlib); not used by the tests.
"""
import argparse
import collections
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("trace")
    p.add_argument("png")
    p.add_argument("--phase")
    a = p.parse_args()
    doc = json.load(open(a.trace))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "thread_name"}
    ops = [e for e in events if e.get("ph") == "X" and "phase" in e.get("args", {})]
    phases = [e for e in events if e.get("ph") == "X" and "phase" not in e.get("args", {})]
    phase = a.phase or [e["name"] for e in phases if e["name"].startswith("decode step")][-1]
    span = next(e for e in phases if e["name"] == phase)
    ops = [e for e in ops if e["args"]["phase"] == phase]
    if not ops:
        sys.exit("render_trace: no ops in phase %r" % phase)
    t0 = span["ts"]
    kinds = collections.OrderedDict()
    for e in sorted(ops, key=lambda e: -e["dur"]):
        kinds.setdefault(e["name"], 0.0)
    for e in ops:
        kinds[e["name"]] += e["dur"]
    order = sorted(kinds, key=lambda k: -kinds[k])
    cmap = plt.get_cmap("tab20")
    colour = {k: cmap(i % 20) for i, k in enumerate(order)}

    fig = plt.figure(figsize=(13, 4.6), dpi=110)
    ax = fig.add_axes([0.07, 0.30, 0.90, 0.55])
    track = names.get((ops[0]["pid"], ops[0]["tid"]), "context")
    rows = {"phases": 1, track: 0}
    ax.broken_barh([(0, span["dur"])], (1 - 0.35, 0.7), color="#9aa9c2")
    ax.text(span["dur"] / 2, 1, "%s  (%.0f us)" % (phase, span["dur"]), ha="center",
            va="center", fontsize=9)
    for e in ops:
        x = e["ts"] - t0
        ax.broken_barh([(x, max(e["dur"], 0.01))], (-0.35, 0.7), color=colour[e["name"]],
                       edgecolor="white", linewidth=0.3)
        if e["dur"] > span["dur"] / 40:
            ax.text(x + e["dur"] / 2, 0, e["name"], ha="center", va="center", fontsize=6.5,
                    rotation=90)
    ax.set_yticks(list(rows.values()))
    ax.set_yticklabels(list(rows.keys()))
    ax.set_ylim(-0.6, 1.6)
    ax.set_xlim(-span["dur"] * 0.01, span["dur"] * 1.01)
    ax.set_xlabel("microseconds from the start of the step (device timestamps)")
    total = sum(e["dur"] for e in ops)
    ax.set_title("gllmk-generate --synthetic tiny --backend cpu: %s, %d ops, %.0f us of op "
                 "time in a %.0f us step" % (phase, len(ops), total, span["dur"]), fontsize=10)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[k]) for k in order]
    labels = ["%s %.0f us" % (k, kinds[k]) for k in order]
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(order)), fontsize=8,
               frameon=False)
    fig.savefig(a.png)
    print("%s: %s, %d ops" % (a.png, phase, len(ops)))


if __name__ == "__main__":
    main()
