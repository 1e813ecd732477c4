"""Independent PyTorch reference for optkit's model data plane (test oracle and trainer).

Nothing here is used by optkit itself: it reads and writes safetensors with the standard library
and runs the Llama-family forward pass (Llama incl. llama3 rope scaling, Mistral, Qwen2 qkv bias,
Qwen3 q/k RMSNorm, GQA, tied embeddings) in plain PyTorch, in fp32.
"""
import json
import math
import os
import struct

import torch

DTYPES = {
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "I32": torch.int32,
    "I64": torch.int64,
}
NAMES = {v: k for k, v in DTYPES.items()}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        buf = bytearray(data[base + begin : base + end])
        t = torch.frombuffer(buf, dtype=DTYPES[info["dtype"]]) if buf else torch.empty(0, dtype=DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"]).clone()
    return out


def write_safetensors(path, tensors):
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
    os.replace(tmp, path)


class Config:
    def __init__(self, d):
        self.raw = d
        self.arch = d["architectures"][0]
        self.vocab = d["vocab_size"]
        self.hidden = d["hidden_size"]
        self.inter = d["intermediate_size"]
        self.layers = d["num_hidden_layers"]
        self.heads = d["num_attention_heads"]
        self.kv_heads = d.get("num_key_value_heads") or self.heads
        self.head_dim = d.get("head_dim") or self.hidden // self.heads
        self.theta = d.get("rope_theta", 10000.0)
        self.eps = d.get("rms_norm_eps", 1e-6)
        self.scaling = d.get("rope_scaling")
        self.tied = d.get("tie_word_embeddings", False)
        self.qkv_bias = self.arch == "Qwen2ForCausalLM" or d.get("attention_bias", False)
        self.qk_norm = self.arch == "Qwen3ForCausalLM"
        self.window = d.get("sliding_window") if self.arch == "MistralForCausalLM" else None


def load_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        return Config(json.load(f))


def inverse_frequencies(cfg):
    inv = 1.0 / (cfg.theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float64) / cfg.head_dim))
    s = cfg.scaling
    if s and s.get("rope_type", s.get("type")) == "llama3":
        factor, lo, hi = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
        old = s["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > old / lo, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= old / hi) & (wavelen <= old / lo)
        inv = torch.where(medium, smoothed, scaled)
    return inv.float()


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def forward(cfg, W, ids, dtype=torch.float32, bf16_inputs=False):
    """Logits in `dtype` (fp32 unless asked) for token ids [T] -> [T, vocab] or [B, T] -> [B, T, vocab]
    (causal, positions from 0). bf16_inputs: every linear layer's input is rounded to bfloat16 by
    PyTorch's cast (nearest, ties to even) before the product, which stays in `dtype` (optkit's
    --activations bf16 and llama.cpp's numerics for BF16 weights)."""

    def linear(h, weight):
        if bf16_inputs:
            h = h.to(torch.bfloat16).to(dtype)
        return h @ weight.T

    ids = torch.as_tensor(ids)
    single = ids.dim() == 1
    if single:
        ids = ids.unsqueeze(0)
    W = {k: v.to(dtype) for k, v in W.items()}
    B, T = ids.shape
    x = W["model.embed_tokens.weight"][ids]
    pos = torch.arange(T, dtype=dtype)
    freqs = torch.outer(pos, inverse_frequencies(cfg).to(dtype))
    cos = torch.cat((freqs, freqs), -1).cos()
    sin = torch.cat((freqs, freqs), -1).sin()
    mask = torch.full((T, T), float("-inf"), dtype=dtype).triu(1)
    if cfg.window:
        mask = mask + torch.full((T, T), float("-inf"), dtype=dtype).tril(-cfg.window)
    group = cfg.heads // cfg.kv_heads
    for i in range(cfg.layers):
        p = f"model.layers.{i}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], cfg.eps)

        def proj(name, n):
            y = linear(h, W[p + f"self_attn.{name}.weight"])
            if cfg.qkv_bias:
                y = y + W[p + f"self_attn.{name}.bias"]
            return y.view(B, T, n, cfg.head_dim).transpose(1, 2)

        q, k, v = proj("q_proj", cfg.heads), proj("k_proj", cfg.kv_heads), proj("v_proj", cfg.kv_heads)
        if cfg.qk_norm:
            q = rms_norm(q, W[p + "self_attn.q_norm.weight"], cfg.eps)
            k = rms_norm(k, W[p + "self_attn.k_norm.weight"], cfg.eps)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k = k.repeat_interleave(group, 1)
        v = v.repeat_interleave(group, 1)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(cfg.head_dim) + mask
        o = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, cfg.heads * cfg.head_dim)
        x = x + linear(o, W[p + "self_attn.o_proj.weight"])
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], cfg.eps)
        gate = torch.nn.functional.silu(linear(h, W[p + "mlp.gate_proj.weight"]))
        x = x + linear(gate * linear(h, W[p + "mlp.up_proj.weight"]), W[p + "mlp.down_proj.weight"])
    x = rms_norm(x, W["model.norm.weight"], cfg.eps)
    head = W["model.embed_tokens.weight"] if cfg.tied else W["lm_head.weight"]
    logits = linear(x, head)
    return logits[0] if single else logits


def init_weights(cfg, generator, std=0.02):
    """Random weights of every tensor the architecture names (fp32)."""
    shapes = {"model.embed_tokens.weight": (cfg.vocab, cfg.hidden), "model.norm.weight": (cfg.hidden,)}
    if not cfg.tied:
        shapes["lm_head.weight"] = (cfg.vocab, cfg.hidden)
    q, kv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    for i in range(cfg.layers):
        p = f"model.layers.{i}."
        shapes.update({
            p + "input_layernorm.weight": (cfg.hidden,),
            p + "post_attention_layernorm.weight": (cfg.hidden,),
            p + "self_attn.q_proj.weight": (q, cfg.hidden),
            p + "self_attn.k_proj.weight": (kv, cfg.hidden),
            p + "self_attn.v_proj.weight": (kv, cfg.hidden),
            p + "self_attn.o_proj.weight": (cfg.hidden, q),
            p + "mlp.gate_proj.weight": (cfg.inter, cfg.hidden),
            p + "mlp.up_proj.weight": (cfg.inter, cfg.hidden),
            p + "mlp.down_proj.weight": (cfg.hidden, cfg.inter),
        })
        if cfg.qkv_bias:
            shapes.update({p + "self_attn.q_proj.bias": (q,), p + "self_attn.k_proj.bias": (kv,),
                           p + "self_attn.v_proj.bias": (kv,)})
        if cfg.qk_norm:
            shapes.update({p + "self_attn.q_norm.weight": (cfg.head_dim,), p + "self_attn.k_norm.weight": (cfg.head_dim,)})
    W = {}
    for name, shape in shapes.items():
        if name.endswith("norm.weight"):
            W[name] = 1.0 + 0.1 * torch.randn(shape, generator=generator)
        elif name.endswith(".bias"):
            W[name] = 0.1 * torch.randn(shape, generator=generator)
        else:
            W[name] = std * torch.randn(shape, generator=generator)
    return W
