#!/usr/bin/env python3
"""make_model.py - Hugging Face model directories with random weights, for
testing gllmk-generate without downloads.

--size tiny: the model is built by transformers itself (config object made
  here, random init with a seed, save_pretrained to safetensors): hidden 128,
  heads 4, kv heads 2, head_dim 32, intermediate 256, vocab 1000, max
  position 1024, 2-4 layers. Weights have std 0.2 (norms 1 + noise, biases
  std 0.1) so that logits are far from ties. Families:
    llama          LlamaForCausalLM, rope theta 1e4
    llama3.1       + rope_scaling llama3 (factor 8, low 1, high 4, original
                   256: the scaling changes frequencies at short positions)
    llama3.2-tied  llama3 rope scaling (factor 32) and tie_word_embeddings
    mistral        MistralForCausalLM (no sliding window)
    qwen2          Qwen2ForCausalLM (q/k/v bias), rope theta 1e6
    qwen3          Qwen3ForCausalLM (q_norm / k_norm), rope theta 1e6
--size 8b: Llama-3-8B's shape (hidden 4096, 32 layers, 32/8 heads,
  intermediate 14336, vocab 128256), written without transformers: random
  tensors streamed shard by shard (default 5GB) with safetensors' save_file,
  plus config.json (4.x style, like the published checkpoint) and
  model.safetensors.index.json (written last: its presence marks a complete
  directory). Generated on the GPU when there is one. For load timing.

--config-style rewrites config.json afterwards: v4 (rope_theta, rope_scaling,
torch_dtype) or v5 (rope_parameters, dtype); native keeps what was written.

usage: make_model.py --family llama|llama3.1|llama3.2-tied|mistral|qwen2|qwen3
                     --size tiny|8b --dtype bf16|f16|f32 --out DIR
                     [--shard-size 50MB] [--layers N] [--seed S]
                     [--config-style native|v4|v5]
as a module: make_tiny(family, dtype, out, ...), make_8b(out, ...), make(...)
"""
import argparse
import inspect
import json
import os
import re
import sys
import time

import torch

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
DTYPE_NAMES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 256}
FAMILIES = {
    # config class, model class, rope theta, rope scaling, tied, rms eps, layers
    "llama": ("LlamaConfig", "LlamaForCausalLM", 10000.0, None, False, 1e-5, 2),
    "llama3.1": ("LlamaConfig", "LlamaForCausalLM", 500000.0, LLAMA3, False, 1e-5, 3),
    "llama3.2-tied": ("LlamaConfig", "LlamaForCausalLM", 500000.0, dict(LLAMA3, factor=32.0),
                      True, 1e-5, 2),
    "mistral": ("MistralConfig", "MistralForCausalLM", 1000000.0, None, False, 1e-5, 3),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", 1000000.0, None, False, 1e-6, 3),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", 1000000.0, None, False, 1e-6, 4),
}
TINY = dict(vocab_size=1000, hidden_size=128, intermediate_size=256, num_attention_heads=4,
            num_key_value_heads=2, head_dim=32, max_position_embeddings=1024,
            initializer_range=0.2, hidden_act="silu", bos_token_id=998, eos_token_id=999)
LLAMA3_8B = dict(hidden=4096, layers=32, heads=32, kv_heads=8, intermediate=14336, vocab=128256)


def transformers_major():
    import transformers
    return int(transformers.__version__.split(".")[0])


def parse_size(s):
    """'50MB' -> 50e6, '1MiB' -> 2**20, '5GB', plain bytes (as transformers reads them)."""
    if isinstance(s, int):
        return s
    m = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]?)(I?B?)\s*", str(s).upper())
    if not m:
        raise ValueError(f"bad size {s!r}")
    power = " KMGT".index(m.group(2) or " ")
    base = 1024 if m.group(3).startswith("I") else 1000
    return int(float(m.group(1)) * base ** power)


def restyle_config(path, style):
    """Rewrite DIR/config.json in transformers 4.x (v4) or 5.x (v5) style."""
    if style == "native":
        return
    fn = os.path.join(path, "config.json")
    with open(fn) as f:
        c = json.load(f)
    if style == "v4":
        if "rope_parameters" in c:
            rp = dict(c.pop("rope_parameters") or {})
            c["rope_theta"] = rp.pop("rope_theta", 10000.0)
            c["rope_scaling"] = rp if rp.get("rope_type", rp.get("type", "default")) != "default" else None
        if "dtype" in c:
            c["torch_dtype"] = c.pop("dtype")
    elif style == "v5":
        if "rope_theta" in c or "rope_scaling" in c:
            rp = {"rope_type": "default"}
            rp.update(c.pop("rope_scaling", None) or {})
            rp.pop("type", None)
            rp["rope_theta"] = c.pop("rope_theta", 10000.0)
            c["rope_parameters"] = rp
        if "torch_dtype" in c:
            c["dtype"] = c.pop("torch_dtype")
    else:
        raise ValueError(f"config style {style!r}")
    with open(fn, "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)
        f.write("\n")


def tiny_config(family, layers=None):
    import transformers
    cfg_name, _, theta, scaling, tied, eps, n_layers = FAMILIES[family]
    cls = getattr(transformers, cfg_name)
    kw = dict(TINY, num_hidden_layers=layers or n_layers, rms_norm_eps=eps, tie_word_embeddings=tied)
    if family == "qwen2":  # Qwen2Config has no head_dim: hidden / heads (32 here too)
        del kw["head_dim"]
    if family == "mistral":
        kw["sliding_window"] = None
    if family == "qwen3":
        kw["attention_bias"] = False
    if transformers_major() >= 5:
        kw["rope_parameters"] = dict(scaling or {"rope_type": "default"}, rope_theta=theta)
    else:
        kw["rope_theta"] = theta
        kw["rope_scaling"] = dict(scaling) if scaling else None
    return cls(**kw)


def make_tiny(family, dtype, out, shard_size=None, seed=0, layers=None, config_style="native",
              std=0.2):
    """Random tiny model of a family, saved to out with save_pretrained. Returns out."""
    import transformers
    torch.manual_seed(seed)
    config = tiny_config(family, layers)
    model = getattr(transformers, FAMILIES[family][1])(config)
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied weights appear once
            if name.endswith("norm.weight"):  # input/post-attention/final/q/k norms
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.normal_(0.0, 0.1)
            else:
                p.normal_(0.0, std)
    model = model.to(DTYPES[dtype]).eval()
    kw = {}
    params = inspect.signature(model.save_pretrained).parameters
    if "safe_serialization" in params:
        kw["safe_serialization"] = True
    if shard_size:
        kw["max_shard_size"] = shard_size
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(str(out), **kw)
    # make sure the stored dtype is named whatever transformers wrote
    fn = os.path.join(out, "config.json")
    with open(fn) as f:
        c = json.load(f)
    if c.get("dtype") is None and c.get("torch_dtype") is None:
        c["dtype" if transformers_major() >= 5 else "torch_dtype"] = DTYPE_NAMES[dtype]
        with open(fn, "w") as f:
            json.dump(c, f, indent=2, sort_keys=True)
    restyle_config(out, config_style)
    return out


def llama8b_tensors(shape=LLAMA3_8B):
    """(name, shape, mean) of every tensor of a Llama-3-8B checkpoint, in file order."""
    h, inter, v = shape["hidden"], shape["intermediate"], shape["vocab"]
    kv = shape["kv_heads"] * h // shape["heads"]
    t = [("model.embed_tokens.weight", (v, h), 0.0)]
    for i in range(shape["layers"]):
        p = f"model.layers.{i}."
        t += [(p + "input_layernorm.weight", (h,), 1.0),
              (p + "self_attn.q_proj.weight", (h, h), 0.0),
              (p + "self_attn.k_proj.weight", (kv, h), 0.0),
              (p + "self_attn.v_proj.weight", (kv, h), 0.0),
              (p + "self_attn.o_proj.weight", (h, h), 0.0),
              (p + "post_attention_layernorm.weight", (h,), 1.0),
              (p + "mlp.gate_proj.weight", (inter, h), 0.0),
              (p + "mlp.up_proj.weight", (inter, h), 0.0),
              (p + "mlp.down_proj.weight", (h, inter), 0.0)]
    t += [("model.norm.weight", (h,), 1.0), ("lm_head.weight", (v, h), 0.0)]
    return t


def make_8b(out, dtype="bf16", shard_size="5GB", seed=0, config_style="native", device=None,
            verbose=True):
    """Llama-3-8B-shaped random checkpoint streamed into sharded safetensors. Returns out."""
    from safetensors.torch import save_file
    td = DTYPES[dtype]
    esize = torch.tensor([], dtype=td).element_size()
    limit = parse_size(shard_size)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    gen = torch.Generator(device=device).manual_seed(seed)
    shards, cur, cur_bytes = [], [], 0
    for name, shape, mean in llama8b_tensors():
        nbytes = esize
        for d in shape:
            nbytes *= d
        if cur and cur_bytes + nbytes > limit:
            shards.append(cur)
            cur, cur_bytes = [], 0
        cur.append((name, shape, mean))
        cur_bytes += nbytes
    shards.append(cur)
    os.makedirs(out, exist_ok=True)
    index = os.path.join(out, "model.safetensors.index.json")
    if os.path.exists(index):
        os.remove(index)
    weight_map, total = {}, 0
    t0 = time.time()
    for i, shard in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        tensors = {}
        for name, shape, mean in shard:
            x = torch.empty(shape, dtype=td, device=device)
            x.normal_(mean, 0.02, generator=gen)
            tensors[name] = x.cpu()
            weight_map[name] = fname
            total += x.numel() * esize
        save_file(tensors, os.path.join(out, fname), metadata={"format": "pt"})
        del tensors
        if verbose:
            print(f"make_model: {fname} ({total / 1e9:.1f} GB so far, {time.time() - t0:.0f} s)",
                  file=sys.stderr)
    s = LLAMA3_8B
    config = {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu",
        "hidden_size": s["hidden"], "initializer_range": 0.02, "intermediate_size": s["intermediate"],
        "max_position_embeddings": 8192, "mlp_bias": False, "model_type": "llama",
        "num_attention_heads": s["heads"], "num_hidden_layers": s["layers"],
        "num_key_value_heads": s["kv_heads"], "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_scaling": None, "rope_theta": 500000.0, "tie_word_embeddings": False,
        "torch_dtype": DTYPE_NAMES[dtype], "transformers_version": "4.40.0", "use_cache": True,
        "vocab_size": s["vocab"]}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    restyle_config(out, config_style)
    with open(index + ".tmp", "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    os.replace(index + ".tmp", index)
    return out


def make(family, size, dtype, out, shard_size=None, seed=0, layers=None, config_style="native"):
    if size == "tiny":
        return make_tiny(family, dtype, out, shard_size, seed, layers, config_style)
    if size == "8b":
        if family != "llama":
            raise ValueError("--size 8b is Llama-3-8B's shape: use --family llama")
        return make_8b(out, dtype, shard_size or "5GB", seed, config_style)
    raise ValueError(f"size {size!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="llama", choices=sorted(FAMILIES))
    ap.add_argument("--size", default="tiny", choices=["tiny", "8b"])
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    ap.add_argument("--out", required=True)
    ap.add_argument("--shard-size", help="e.g. 50MB, 1MiB (tiny: transformers' default; 8b: 5GB)")
    ap.add_argument("--layers", type=int, help="tiny: layer count (default per family, 2-4)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--config-style", default="native", choices=["native", "v4", "v5"])
    a = ap.parse_args()
    make(a.family, a.size, a.dtype, a.out, a.shard_size, a.seed, a.layers, a.config_style)
    print(a.out)


if __name__ == "__main__":
    main()
