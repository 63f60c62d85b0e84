"""Chrome traces: gllmk.trace() from Python and --trace of gllmk-generate and
gllmk-bench write valid Trace Event Format JSON whose op events carry device
times that account for the traced work's wall time."""
import json
import os
import subprocess
import time

import numpy as np
import pytest

import gllmk
from gllmk import _capi

BIN = os.path.join(os.environ["GLLMK_LIBRARY_DIR"], "..", "bin")


def check_trace(path):
    """Loads a trace and checks it as a viewer would read it; returns the op events."""
    with open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    assert isinstance(events, list) and events
    for e in events:
        assert e["ph"] in ("X", "M") and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "X":
            assert isinstance(e["name"], str)
            assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
            assert e["ts"] >= 0 and e["dur"] >= 0
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    ops = [e for e in events if e["ph"] == "X" and e["name"] in _capi.OPS and "shapes" in e["args"]]
    assert ops
    for e in ops:
        args = e["args"]
        assert e["tid"] in names
        assert args["dtype"] in _capi.DTYPES and args["host_timed"] in (0, 1)
        assert isinstance(args["bytes"], int) and args["bytes"] > 0 and args["flops"] >= 0
        assert all(isinstance(n, int) for shape in args["shapes"].values() for n in shape)
    for a, b in zip(ops, ops[1:]):  # one in-order queue per track: ops never overlap
        if a["tid"] == b["tid"]:
            assert b["ts"] >= a["ts"] + a["dur"] - 0.01, (a, b)
    return ops


def test_python_trace(ctx, tmp_path):
    path = tmp_path / "ops.json"
    a = np.ones((8, 64), np.float32)
    w = np.ones((32, 64), np.float32)
    with gllmk.trace(str(path)) as t:
        gllmk.rmsnorm(a, a[0], context=ctx)
        gllmk.matmul(a, w, context=ctx)
        late = gllmk.Context("cpu")  # made inside the trace: traced too
        gllmk.silu(a, context=late)
    ops = check_trace(path)
    assert [e["name"] for e in ops] == ["rmsnorm", "matmul", "silu"] and t.events == ops
    mm = ops[1]["args"]
    assert mm["shapes"] == {"out": [8, 32], "a": [8, 64], "b": [32, 64]} and mm["dtype"] == "f32"
    assert mm["flops"] == 2 * 8 * 32 * 64 and mm["bytes"] == 4 * (8 * 32 + 8 * 64 + 32 * 64)
    assert ops[0]["tid"] != ops[2]["tid"]  # one track per context
    gllmk.silu(a, context=ctx)  # after the trace: timing is off again
    assert ctx._timing is None


def test_device_durations_account_for_wall_time(cpu):
    """Matmuls large enough that the bindings' own time is noise: the sum of
    the ops' device durations is within 10% of the wall time around them."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((768, 768)).astype(np.float32)
    b = rng.standard_normal((768, 768)).astype(np.float32)
    out = np.empty_like(a)
    gllmk.matmul(a, b, out=out, context=cpu)
    with gllmk.trace() as t:
        start = time.perf_counter()
        for _ in range(8):
            gllmk.matmul(a, b, out=out, context=cpu)
        wall = time.perf_counter() - start
    device = sum(e["dur"] for e in t.events) / 1e6
    print("8 matmuls 768^3 f32: device %.2f ms, wall %.2f ms" % (device * 1e3, wall * 1e3))
    assert len(t.events) == 8 and all(e["args"]["host_timed"] == 0 for e in t.events)
    assert abs(device - wall) <= 0.1 * wall, "device %.4f s, wall %.4f s" % (device, wall)


def test_trace_of_generation(ctx, tmp_path):
    model = gllmk.Model("tiny", context=ctx)
    path = tmp_path / "generate.json"
    with gllmk.trace(str(path)):
        tokens = list(model.generate([1, 2, 3], max_new=2))
    assert len(tokens) == 2
    names = {e["name"] for e in check_trace(path)}
    # rmsnorm in both forms of a forward (docs/generator.md): the final norm
    # when the norms are inside the matmuls (cpu; vulkan at up to 4 rows, as
    # this 3-token prompt and its decode step are), the first layer's else.
    # The cpu and vulkan turn q and k inside the q/k/v matmul too (matmul's
    # rope), copy k and v into the caches there (matmul's kv) and join gate and
    # up inside theirs (matmul's glu): no rope, kv_append or swiglu.
    assert {"embedding", "matmul", "paged_attention", "rmsnorm"} <= names
    fused = {"rope", "kv_append", "swiglu"}
    fused_here = {"cpu": fused, "vulkan": fused}
    for op in ("rope", "kv_append", "swiglu"):
        assert (op in names) == (op not in fused_here.get(ctx.backend, set())), op


def test_nested_traces_are_refused():
    with gllmk.trace():
        with pytest.raises(RuntimeError, match="already open"):
            gllmk.trace().__enter__()


@pytest.mark.parametrize("backend", ["cpu", "vulkan"])
def test_gllmk_generate_trace(backend, tmp_path):
    tool = os.path.join(BIN, "gllmk-generate")
    if not os.path.exists(tool):
        pytest.skip("skipped: %s is not built" % tool)
    path = tmp_path / "gen.json"
    run = subprocess.run([tool, "--synthetic", "tiny", "--backend", backend, "--max-new", "2",
                          "--quiet", "--trace", str(path)], capture_output=True, text=True)
    if run.returncode and "cannot create a context" in run.stderr:
        pytest.skip("skipped: %s: %s" % (backend, run.stderr.strip()))
    assert run.returncode == 0, run.stderr
    ops = check_trace(path)
    phases = {e["args"]["phase"] for e in ops}
    assert {"load", "prefill", "decode step 1"} <= phases
    doc = json.load(open(path))
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["tid"] == 2]
    step = next(e for e in spans if e["name"] == "decode step 1")
    inside = [e for e in ops if e["args"]["phase"] == "decode step 1"]
    assert inside and all(step["ts"] - 0.01 <= e["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"] + 0.01
                          for e in inside)


def test_gllmk_bench_trace(tmp_path):
    tool = os.path.join(BIN, "gllmk-bench")
    if not os.path.exists(tool):
        pytest.skip("skipped: %s is not built" % tool)
    path = tmp_path / "bench.json"
    subprocess.run([tool, "--backend", "cpu", "--quick", "--filter", "softmax", "--reps", "3",
                    "--trace", str(path)], check=True, capture_output=True)
    ops = check_trace(path)
    assert {e["name"] for e in ops} == {"softmax"}
    assert {e["args"]["phase"] for e in ops} == {"softmax f32"}
