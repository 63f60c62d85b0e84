"""bench_shapes.py - the sizes in gllmk-bench's shape texts, without torch
(torch_peer.py builds its PyTorch calls from them; testable anywhere)."""
import re

ATTENTION = re.compile(r"(?:B=(\d+) )?S=(\d+) H=(\d+)/(\d+) D=(\d+) (causal|non-causal)")


def attention_shape(text):
    """(batch, S, Hq, Hkv, D, causal) of an attention/prefill row's shape,
    "[B=4 ]S=4096 H=32/8 D=64 causal|non-causal"; no "B=" means batch 1."""
    m = ATTENTION.fullmatch(text)
    if not m:
        raise ValueError(f"not an attention/prefill shape: {text!r}")
    batch, s, hq, hkv, d = (int(x) if x else 1 for x in m.groups()[:5])
    return batch, s, hq, hkv, d, m.group(6) == "causal"
