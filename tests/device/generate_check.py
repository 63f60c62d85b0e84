#!/usr/bin/env python3
"""generate_check.py - gllmk-generate against PyTorch on real model directories.

Correctness (the default): for each family (llama, llama3.1, llama3.2-tied,
mistral, qwen2, qwen3) and dtype (bf16, f32), a tiny random model is written
with tools/bench/make_model.py (bf16 models get a transformers 4.x style
config.json, f32 ones 5.x style; mistral and qwen3 are sharded), gllmk-generate
runs it greedily (--batch 2 or --batch N, a 12-token prompt, --max-new 32, --json,
--logits-out), and then, teacher-forcing along gllmk's own tokens:
  (a) every logits row is compared with tools/bench/torch_model.py's forward
      on prompt + generated tokens,
  (b) and with transformers' AutoModelForCausalLM (eager attention), the
      ground truth; errors are max |gllmk - reference| over all rows divided
      by the reference's max |logit|; tolerance f32 1e-3, bf16 1e-1 (the
      tiny models' weights have std 0.2, so bf16 rounding grows through the
      layers: torch_model and transformers, both faithful, differ by up to
      0.05 between themselves on the H100);
  (c) greedy agreement: at every step the reference's argmax must be gllmk's
      token, unless the reference's top logit exceeds its logit for gllmk's
      token by no more than the tolerance (a tie: counted, and the check
      goes on along gllmk's token). gllmk's token must also be the argmax of
      gllmk's own logits row.
One line per case, e.g.
  ok llama bf16 cuda: max err 0.0061 (tol 0.1; 0.021 of std) vs torch, 0.0065 vs transformers, 64/64 tokens agree, 0 ties
Exit status 1 when any case failed.

--load-speed: writes a Llama-3-8B-shaped random checkpoint to
  WORKDIR/llama3-8b-shape (kept between runs), reads its files with cat to
  warm the page cache, runs gllmk-generate --model DIR --max-new 1
  --prompt-len 8 --json and prints its load_gbps.
--speed: gllmk-generate --synthetic llama3-8b --prompt-len 128 --max-new 64
  --json at --batch 1 and 32; prints the metrics.
(--load-speed / --speed alone skip the correctness cases; add --check to run
those too.)

usage: generate_check.py --gllmk-generate PATH [--backend cuda|vulkan]
                         [--workdir DIR] [--families a,b] [--dtypes bf16,f32]
                         [--batch N] [--load-speed] [--speed] [--check] [--timeout S]
"""
import argparse
import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "bench"))
import make_model  # noqa: E402
import torch_model  # noqa: E402

FAMILIES = ["llama", "llama3.1", "llama3.2-tied", "mistral", "qwen2", "qwen3"]
TOL = {"f32": 1e-3, "f16": 1e-2, "bf16": 1e-1}
SHARDED = {"mistral", "qwen3"}  # written with max_shard_size 1MB: index.json + shards
PROMPT_LEN, MAX_NEW, BATCH = 12, 32, 2
METRICS = ["prefill_tokens_per_s", "ttft_ms", "decode_tokens_per_s", "weight_bytes", "copy_gbps",
           "decode_pct_of_limit", "load_gbps"]


class GenError(Exception):
    pass


def parse_json(text):
    """The JSON object on gllmk-generate's stdout (the whole output, or the last
    line-initial object when something else was printed too)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    dec = json.JSONDecoder()
    starts = [i for i, c in enumerate(text) if c == "{" and (i == 0 or text[i - 1] == "\n")]
    for i in reversed(starts):
        try:
            return dec.raw_decode(text[i:])[0]
        except ValueError:
            continue
    raise GenError("no JSON object on gllmk-generate's stdout:\n" + text[-2000:])


def run_gen(cmd, timeout):
    """Runs gllmk-generate; its parsed JSON, or GenError with the command and its stderr."""
    cmd = [str(c) for c in cmd]
    shown = " ".join(cmd)
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise GenError(f"timed out after {timeout} s: {shown}\nstderr:\n{err[-4000:]}")
    if p.returncode != 0:
        raise GenError(f"exit status {p.returncode} after {time.time() - t0:.1f} s: {shown}\n"
                       f"stderr:\n{p.stderr[-4000:]}\nstdout:\n{p.stdout[-2000:]}")
    try:
        return parse_json(p.stdout)
    except GenError as e:
        raise GenError(f"{e}\ncommand: {shown}\nstderr:\n{p.stderr[-4000:]}")


def hf_load(path, dtype, device):
    import transformers
    from transformers import AutoModelForCausalLM
    td = make_model.DTYPES[dtype]
    kw = {"dtype": td} if int(transformers.__version__.split(".")[0]) >= 5 else {"torch_dtype": td}
    m = AutoModelForCausalLM.from_pretrained(str(path), attn_implementation="eager", **kw)
    return m.to(device).eval()


@torch.no_grad()
def hf_forward(m, ids, device):
    out = m(input_ids=torch.tensor([ids], dtype=torch.long, device=device), use_cache=False)
    return out.logits[0].float()


def compare(g, ref, toks, tol):
    """g, ref: [n, V] float32 (gllmk, reference) for the n generated tokens toks.
    Returns (max abs error, max |ref|, std of ref, agree, ties, first disagreement)."""
    err = (g - ref).abs().max().item()
    scale = ref.abs().max().item()
    tie_gap = tol * scale
    agree = ties = 0
    bad = None
    for s, t in enumerate(toks):
        top = int(ref[s].argmax())
        if top == t:
            agree += 1
        elif (ref[s, top] - ref[s, t]).item() <= tie_gap:
            ties += 1
        elif bad is None:
            bad = (s, t, top, (ref[s, top] - ref[s, t]).item())
    return err, scale, ref.std().item(), agree, ties, bad


def check_case(a, family, dtype, ref_device):
    tol = TOL[dtype]
    batch = a.batch
    tag = f"{family} {dtype} {a.backend}"
    mdir = Path(a.workdir) / f"{family}-{dtype}"
    if mdir.exists():
        shutil.rmtree(mdir)
    style = "v4" if dtype == "bf16" else ("v5" if make_model.transformers_major() >= 5 else "native")
    make_model.make_tiny(family, dtype, str(mdir), shard_size="1MB" if family in SHARDED else None,
                         seed=1 + FAMILIES.index(family) if family in FAMILIES else 1,
                         config_style=style)
    vocab = make_model.TINY["vocab_size"]
    rng = random.Random(f"{family}-{dtype}")
    prompt = [rng.randrange(2, vocab - 10) for _ in range(PROMPT_LEN)]
    logits_path = Path(a.workdir) / f"{family}-{dtype}.logits"
    if logits_path.exists():
        logits_path.unlink()
    out = run_gen([a.gllmk_generate, "--model", mdir, "--backend", a.backend, "--dtype", dtype,
                   "--prompt-ids", ",".join(map(str, prompt)), "--max-new", MAX_NEW,
                   "--batch", batch, "--json", "--logits-out", logits_path], a.timeout)
    problems, notes = [], []
    tokens = out.get("tokens")
    if not isinstance(tokens, list) or len(tokens) != batch:
        raise GenError(f"expected {batch} token lists in \"tokens\", got {str(tokens)[:200]}")
    V = int(out.get("vocab", vocab))
    if V != vocab:
        problems.append(f"vocab {V}, expected {vocab}")
    if out.get("prompt") is not None and list(out["prompt"]) != prompt:
        problems.append(f"prompt echoed as {out['prompt']}, expected {prompt}")
    if out.get("dtype") not in (None, dtype):
        problems.append(f"ran in dtype {out.get('dtype')}, asked for {dtype}")
    raw = np.fromfile(str(logits_path), dtype="<f4")
    if raw.size == 0 or raw.size % (batch * V):
        raise GenError(f"{logits_path}: {raw.size} floats, not a multiple of batch x vocab "
                       f"= {batch * V} (expected {MAX_NEW * batch * V})")
    steps = raw.size // (batch * V)
    if steps != MAX_NEW:
        notes.append(f"logits file holds {steps} steps")
    g_all = torch.from_numpy(raw.reshape(steps, batch, V).copy())
    if not torch.isfinite(g_all).all():
        problems.append("non-finite logits")
    tm = torch_model.load(str(mdir), dtype, ref_device)
    hm = hf_load(mdir, dtype, ref_device)
    worst = {"torch": 0.0, "transformers": 0.0, "torch vs transformers": 0.0}
    worst_std = 0.0
    agree = ties = total = 0
    P = len(prompt)
    for b in range(batch):
        toks = [int(t) for t in tokens[b]]
        n = min(len(toks), steps)
        if n < MAX_NEW:
            notes.append(f"seq {b} stopped after {len(toks)} tokens")
        if n == 0:
            problems.append(f"seq {b}: no tokens")
            continue
        if any(t < 0 or t >= V for t in toks):
            problems.append(f"seq {b}: token out of range")
            continue
        g = g_all[:n, b]
        for s in range(n):  # greedy: gllmk's token is the argmax of gllmk's logits
            if g[s, toks[s]] < g[s].max():
                problems.append(f"seq {b} step {s}: token {toks[s]} is not the argmax of gllmk's "
                                f"logits ({int(g[s].argmax())})")
                break
        inp = prompt + toks[:n - 1]
        ref_t = torch_model.forward(tm, inp)[P - 1:P - 1 + n].cpu()
        ref_h = hf_forward(hm, inp, ref_device)[P - 1:P - 1 + n].cpu()
        for name, ref, other in (("torch", ref_t, g), ("transformers", ref_h, g),
                                 ("torch vs transformers", ref_h, ref_t)):
            err, scale, std, ag, ti, bad = compare(other, ref, toks[:n], tol)
            rel = err / max(scale, 1e-30)
            worst[name] = max(worst[name], rel)
            if name == "torch":
                worst_std = max(worst_std, err / max(std, 1e-30))
                agree, ties, total = agree + ag, ties + ti, total + n
            if rel > tol:
                problems.append(f"seq {b}: {name} max err {rel:.3g} of max|logit| > tol {tol:g}")
            if bad is not None and name != "torch vs transformers":
                s, t, top, gap = bad
                problems.append(f"seq {b} step {s}: gllmk chose {t}, {name} argmax {top} "
                                f"({gap:.3g} higher)")
    if batch > 1 and any(tokens[b] != tokens[0] for b in range(1, batch)):
        notes.append("the batch's sequences differ")
    line = (f"{family} {dtype} {a.backend}: max err {worst['torch']:.2g} (tol {tol:g}; "
            f"{worst_std:.2g} of std) vs torch, {worst['transformers']:.2g} vs transformers, "
            f"{agree}/{total} tokens agree, {ties} ties")
    if notes:
        line += " [" + "; ".join(notes) + "]"
    del tm, hm
    if ref_device.startswith("cuda"):
        torch.cuda.empty_cache()
    if problems:
        print(f"FAIL {line}")
        for p in problems[:10]:
            print(f"    {p}")
        return False
    print(f"ok {line}")
    return True


def fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def metrics_line(out):
    return ", ".join(f"{k} {fmt(out[k])}" for k in METRICS if k in out)


def load_speed(a):
    mdir = Path(a.workdir) / "llama3-8b-shape"
    if not (mdir / "model.safetensors.index.json").exists():
        print(f"writing the Llama-3-8B-shaped checkpoint to {mdir}", flush=True)
        t0 = time.time()
        make_model.make_8b(str(mdir), "bf16")
        print(f"  written in {time.time() - t0:.0f} s", flush=True)
    files = sorted(str(p) for p in mdir.iterdir() if p.is_file())
    size = sum(Path(f).stat().st_size for f in files)
    for what in ("warm", "cached"):
        t0 = time.time()
        subprocess.run(["cat"] + files, stdout=subprocess.DEVNULL, check=True)
        dt = time.time() - t0
        print(f"cat ({what}): {size / 1e9:.2f} GB in {dt:.2f} s = {size / 1e9 / dt:.2f} GB/s")
    out = run_gen([a.gllmk_generate, "--model", mdir, "--backend", a.backend, "--max-new", 1,
                   "--prompt-len", 8, "--json"], a.timeout)
    gbps = out.get("load_gbps")
    print(f"load {a.backend}: load_gbps {fmt(gbps)} ({metrics_line(out)})")
    return gbps is not None


def speed(a):
    ok = True
    for batch in (1, 32):
        try:
            out = run_gen([a.gllmk_generate, "--synthetic", "llama3-8b", "--backend", a.backend,
                           "--prompt-len", 128, "--max-new", 64, "--batch", batch, "--json"],
                          a.timeout)
        except GenError as e:
            print(f"FAIL speed {a.backend} batch {batch}: {e}")
            ok = False
            continue
        print(f"speed {a.backend} llama3-8b {out.get('dtype', '?')} batch {batch}: {metrics_line(out)}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gllmk-generate", required=True, help="path of the gllmk-generate binary")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--workdir", default=str(ROOT / "build" / "generate-check"))
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--dtypes", default="bf16,f32")
    ap.add_argument("--batch", type=int, default=BATCH,
                    help="sequences decoded together (cuda decodes 1, 2-16, 17-32 and 33-64 rows with different kernels)")
    ap.add_argument("--load-speed", action="store_true")
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--check", action="store_true", help="correctness too with --load-speed/--speed")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per gllmk-generate run")
    ap.add_argument("--ref-device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    Path(a.workdir).mkdir(parents=True, exist_ok=True)
    torch.set_float32_matmul_precision("highest")  # no TF32 in the f32 references
    import transformers
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"references on {a.ref_device}, gllmk-generate {a.gllmk_generate} --backend {a.backend}")
    ok = True
    if a.check or not (a.load_speed or a.speed):
        for family in a.families.split(","):
            for dtype in a.dtypes.split(","):
                try:
                    ok &= check_case(a, family, dtype, a.ref_device)
                except Exception as e:  # one case's failure does not stop the others
                    print(f"FAIL {family} {dtype} {a.backend}: {type(e).__name__}: {e}")
                    ok = False
                sys.stdout.flush()
    if a.load_speed:
        try:
            ok &= load_speed(a)
        except Exception as e:
            print(f"FAIL load speed {a.backend}: {type(e).__name__}: {e}")
            ok = False
    if a.speed:
        ok &= speed(a)
    print("all passed" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
