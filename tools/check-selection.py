#!/usr/bin/env python3
"""check-selection.py - reads `gllmk-info --json` on stdin and checks that the
default context picks EXPECTED (argv[1]) while every plugin named after it
stays available for a forced context. Exit 0 if so."""
import json
import sys

expected, *also_available = sys.argv[1:]
info = json.load(sys.stdin)
states = {p["name"]: p["state"] for p in info["plugins"]}
print("selected:", info["selected_backend"], "states:", states)
ok = info["selected_backend"] == expected and all(
    states.get(name) == "available" for name in also_available)
sys.exit(0 if ok else 1)
