#!/usr/bin/env python3
"""torch_model.py - an independent PyTorch reference for the Llama family of
decoder-only models, read straight from a Hugging Face model directory (no
transformers): LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM (q/k/v
bias) and Qwen3ForCausalLM (per-head q_norm / k_norm before rope).

Semantics follow transformers: RMSNorm computed in float32, cast back to the
model dtype and then multiplied by the weight; NeoX (rotate_half) rope with
cos/sin computed in float32 and cast to the model dtype; GQA; SiLU MLP; every
other op in the model dtype; logits returned as float32.

config.json may be transformers 4.x style (rope_theta, rope_scaling,
torch_dtype) or 5.x style (rope_parameters, dtype); rope types default,
linear and llama3 (Llama 3.1). Weights: model.safetensors or the shards named
by model.safetensors.index.json; tie_word_embeddings; head_dim when present.

as a module:
    m = torch_model.load(DIR, "bf16", "cuda")
    logits = torch_model.forward(m, [1, 2, 3])    # [3, vocab] float32
as a script (greedy continuation, one full forward per token):
    torch_model.py DIR [--dtype bf16] [--ids 1,2,3] [--max-new 8]
"""
import argparse
import json
import math
import os

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

DTYPES = {"f32": torch.float32, "float32": torch.float32, "f16": torch.float16,
          "float16": torch.float16, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16}
ARCHS = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral",
         "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3"}


class Model:
    """Config values and weights (a dict of tensors named as in the checkpoint)."""

    def __init__(self, cfg, weights, dtype, device):
        self.cfg, self.w, self.dtype, self.device = cfg, weights, dtype, torch.device(device)
        self.n_layers = cfg["num_hidden_layers"]
        self.n_heads = cfg["num_attention_heads"]
        self.n_kv = cfg.get("num_key_value_heads") or self.n_heads
        self.head_dim = cfg.get("head_dim") or cfg["hidden_size"] // self.n_heads
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.vocab = cfg["vocab_size"]
        tie = cfg.get("tie_word_embeddings", False)
        self.lm_head = weights["model.embed_tokens.weight"] if tie or "lm_head.weight" not in weights \
            else weights["lm_head.weight"]
        self.inv_freq = inv_freq(cfg, self.head_dim).to(self.device)
        # Mistral's sliding window (Qwen2's per-layer window is not modelled)
        self.window = cfg.get("sliding_window") if cfg.get("model_type") == "mistral" else None


def rope_config(cfg):
    """(theta, rope type, parameters) from a 4.x or 5.x config."""
    rp = cfg.get("rope_parameters") or {}
    if rp and all(isinstance(v, dict) for v in rp.values()):  # per layer type
        rp = rp.get("full_attention") or next(iter(rp.values()))
    params = dict(cfg.get("rope_scaling") or {})
    params.update(rp)
    theta = float(params.pop("rope_theta", cfg.get("rope_theta", 10000.0)))
    kind = params.get("rope_type", params.get("type", "default"))
    return theta, kind, params


def inv_freq(cfg, head_dim):
    """Float32 inverse frequencies [head_dim / 2], as transformers' rope init functions."""
    theta, kind, p = rope_config(cfg)
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim)
    if kind == "default":
        return inv
    if kind == "linear":
        return inv / p["factor"]
    if kind == "llama3":
        factor, low, high = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
        old_len = p["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old_len / low, old_len / high
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, scaled)
    raise NotImplementedError(f"rope type {kind!r}")


def read_weights(path, device):
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    weights = {}
    for name in files:
        weights.update(load_file(os.path.join(path, name), device=str(device)))
    return weights


def load(path, dtype="bf16", device="cuda"):
    """A Model from a Hugging Face directory, weights cast to dtype on device."""
    dtype = DTYPES[dtype] if isinstance(dtype, str) else dtype
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    arch = (cfg.get("architectures") or ["?"])[0]
    if arch not in ARCHS and cfg.get("model_type") not in ARCHS.values():
        raise ValueError(f"{path}: unsupported architecture {arch}")
    if cfg.get("hidden_act", "silu") not in ("silu", "swish"):
        raise ValueError(f"{path}: unsupported activation {cfg['hidden_act']}")
    weights = {k: v.to(dtype) for k, v in read_weights(path, device).items()}
    return Model(cfg, weights, dtype, device)


def rms_norm(x, weight, eps):
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(x.dtype)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def linear(m, x, name):
    return F.linear(x, m.w[name + ".weight"], m.w.get(name + ".bias"))


def attention(m, p, h, cos, sin):
    b, n, _ = h.shape
    q = linear(m, h, p + "q_proj").view(b, n, m.n_heads, m.head_dim)
    k = linear(m, h, p + "k_proj").view(b, n, m.n_kv, m.head_dim)
    v = linear(m, h, p + "v_proj").view(b, n, m.n_kv, m.head_dim)
    if p + "q_norm.weight" in m.w:  # Qwen3
        q = rms_norm(q, m.w[p + "q_norm.weight"], m.eps)
        k = rms_norm(k, m.w[p + "k_norm.weight"], m.eps)
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [b, heads, n, d]
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    rep = m.n_heads // m.n_kv
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    if m.window and n > m.window:
        i = torch.arange(n, device=h.device)
        mask = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < m.window)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    else:
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    o = o.transpose(1, 2).reshape(b, n, m.n_heads * m.head_dim)
    return linear(m, o, p + "o_proj")


def mlp(m, p, h):
    return linear(m, F.silu(linear(m, h, p + "gate_proj")) * linear(m, h, p + "up_proj"),
                  p + "down_proj")


@torch.no_grad()
def forward(m, token_ids):
    """Full causal forward from position 0: float32 logits [n, vocab] for ids [n]
    (or [batch, n, vocab] for ids [batch, n])."""
    ids = torch.as_tensor(token_ids, dtype=torch.long, device=m.device)
    single = ids.dim() == 1
    if single:
        ids = ids[None]
    x = m.w["model.embed_tokens.weight"][ids]
    pos = torch.arange(ids.shape[1], device=m.device, dtype=torch.float32)
    freqs = pos[:, None] * m.inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(m.dtype), emb.sin().to(m.dtype)
    for i in range(m.n_layers):
        p = f"model.layers.{i}."
        x = x + attention(m, p + "self_attn.", rms_norm(x, m.w[p + "input_layernorm.weight"], m.eps),
                          cos, sin)
        x = x + mlp(m, p + "mlp.", rms_norm(x, m.w[p + "post_attention_layernorm.weight"], m.eps))
    x = rms_norm(x, m.w["model.norm.weight"], m.eps)
    logits = F.linear(x, m.lm_head).float()
    return logits[0] if single else logits


def main():
    ap = argparse.ArgumentParser(description="greedy continuation with the reference model")
    ap.add_argument("model")
    ap.add_argument("--dtype", default="bf16", choices=["f32", "f16", "bf16"])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--ids", default="1,2,3,4")
    ap.add_argument("--max-new", type=int, default=8)
    a = ap.parse_args()
    m = load(a.model, a.dtype, a.device)
    ids = [int(t) for t in a.ids.split(",")]
    out = []
    for _ in range(a.max_new):
        out.append(int(forward(m, ids + out)[-1].argmax()))
    print(json.dumps({"prompt": ids, "tokens": out}))


if __name__ == "__main__":
    main()
