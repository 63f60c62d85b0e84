"""The generator from Python (gllmk.Model, Session) on cpu and vulkan: the
same tokens as gllmk-generate, logits that agree with the sampled tokens,
seeded sampling, errors carrying libgllmk-model's messages."""
import json
import os
import subprocess

import numpy as np
import pytest

import gllmk

PROMPT = [1, 2, 3, 4]
_models = {}


def tiny(ctx, dtype=None):
    key = (ctx.backend, dtype)
    if key not in _models:
        _models[key] = gllmk.Model("tiny", context=ctx, dtype=dtype)
    return _models[key]


def test_info(ctx):
    m = tiny(ctx)
    assert m.info["model_type"] == "tiny" and m.info["dtype"] == "bf16" and m.vocab == 1024
    assert m.info["layers"] >= 1 and m.info["arch"] == "llama" and "vocab 1024" in repr(m)


def test_generate_matches_gllmk_generate(ctx):
    tool = os.path.join(os.environ["GLLMK_LIBRARY_DIR"], "..", "bin", "gllmk-generate")
    if not os.path.exists(tool):
        pytest.skip("skipped: %s is not built" % tool)
    report = subprocess.run([tool, "--synthetic", "tiny", "--backend", ctx.backend, "--prompt-ids",
                             ",".join(map(str, PROMPT)), "--max-new", "8", "--json"],
                            check=True, capture_output=True, text=True).stdout
    want = json.loads(report)["tokens"][0]
    assert list(tiny(ctx).generate(PROMPT, max_new=8)) == want


def test_generate_stops_and_is_lazy(ctx):
    tokens = list(tiny(ctx).generate(PROMPT, max_new=6))
    assert list(tiny(ctx).generate(PROMPT, max_new=6, stop={tokens[2]})) == tokens[:3]
    it = tiny(ctx).generate(PROMPT, max_new=1000)
    assert next(it) == tokens[0]
    it.close()  # the session is freed with the generator


def test_seeded_sampling(ctx):
    m = tiny(ctx)
    a = list(m.generate(PROMPT, max_new=12, temperature=1.5, top_k=50, seed=7))
    b = list(m.generate(PROMPT, max_new=12, temperature=1.5, top_k=50, seed=7))
    c = list(m.generate(PROMPT, max_new=12, temperature=1.5, top_k=50, seed=8))
    assert a == b and a != c


def test_forward_batch_and_logits(ctx):
    m = tiny(ctx, "f32")
    with m.session(cache_tokens=256) as s:
        a, b = s.add(), s.add()
        tokens = s.forward({a: PROMPT, b: [9, 8]})
        assert len(tokens) == 2 and s.length(a) == 4 and s.length(b) == 2
        tokens, logits = s.forward([(a, [tokens[0]]), (b, [tokens[1]])], logits=True)
        assert logits.shape == (2, m.vocab) and logits.dtype == "f32"
        host = logits.numpy()
        assert list(host.argmax(-1)) == tokens  # greedy: the argmax of these logits
        if ctx.backend == "cpu":  # addressable memory: DLPack without a copy
            assert (np.from_dlpack(logits) == host).all()
        stats = s.stats()
        assert stats["live_sequences"] == 2 and stats["blocks_total"] >= 2
        s.free(b)
        s.forward({a: [tokens[0]]}, tokens=False)
        with pytest.raises(gllmk.Error, match="earlier forward"):
            logits.numpy()


def test_per_sequence_sampling(ctx):
    m = tiny(ctx)
    with m.session(cache_tokens=128) as s:
        a, b = s.add(), s.add()
        sampling = [dict(temperature=0.0), dict(temperature=1.0, seed=3)]
        tokens = s.forward({a: PROMPT, b: PROMPT}, sampling)
        greedy = list(m.generate(PROMPT, max_new=1))
        assert tokens[0] == greedy[0]


def test_decode_is_forward_fed_its_own(ctx):
    m = tiny(ctx)
    runs = []
    for way in ("forward", "decode"):
        with m.session(cache_tokens=256, block_size=4) as s:
            a, b = s.add(), s.add()
            sampling = [dict(temperature=0.0), dict(temperature=1.0, top_k=50, seed=3)]
            last = s.forward([(a, PROMPT)], sampling[:1]) + s.forward([(b, [7, 8])], sampling[1:])
            if way == "decode":
                runs.append(s.decode([(a, last[0]), (b, last[1])], 35, sampling))
            else:
                steps = []
                for _ in range(35):
                    last = s.forward([(a, [last[0]]), (b, [last[1]])], sampling)
                    steps.append(last)
                runs.append([[t[i] for t in steps] for i in range(2)])
            assert s.length(a) == len(PROMPT) + 35 and s.length(b) == 2 + 35
    assert runs[0] == runs[1]
    with m.session(cache_tokens=64) as s:
        with pytest.raises(gllmk.InvalidArgumentError, match="^gllmk_session_decode: steps must be"):
            s.decode({s.add(): 1}, 0)


def test_errors_are_the_generators(ctx):
    m = tiny(ctx)
    with m.session(cache_tokens=64) as s:
        seq = s.add()
        with pytest.raises(gllmk.InvalidArgumentError, match=r"^gllmk_session_forward: sequence 0, "
                           r"new token 0: id 5000 is outside the vocabulary \[0, 1024\)$"):
            s.forward({seq: [5000]})
        with pytest.raises(gllmk.InvalidArgumentError, match="is not a live sequence"):
            s.forward({seq + 99: [1]})
    with pytest.raises(gllmk.Error, match="closed"):
        s.add()
    with pytest.raises(gllmk.InvalidArgumentError, match="config.json: cannot open it"):
        gllmk.Model("no/such/dir", context=ctx)
    with pytest.raises(gllmk.InvalidArgumentError, match='synthetic model "huge" is not one of'):
        gllmk.Model(synthetic="huge", context=ctx)


def test_split_over_two_cpu_contexts():
    """Tensor parallelism through the cpu loopback: the same tokens as one context."""
    ranks = [gllmk.Context("cpu"), gllmk.Context("cpu"), gllmk.Context("cpu")]
    try:
        whole = gllmk.Model("tiny", context=ranks[0], dtype="f32")
        split = gllmk.Model("tiny", contexts=ranks[:2], dtype="f32")
        assert split.context is ranks[0] and split.vocab == whole.vocab
        assert list(split.generate(PROMPT, max_new=8)) == list(whole.generate(PROMPT, max_new=8))
        with pytest.raises(gllmk.Error, match="do not split over 3 devices"):
            gllmk.Model("tiny", contexts=ranks)
        with pytest.raises(ValueError):
            gllmk.Model("tiny", context=ranks[0], contexts=ranks[:2])
        split.close()
        whole.close()
    finally:
        for ctx in ranks:
            ctx.close()
