"""Independent PyTorch reference for optkit's model data plane (test oracle and trainer).

Nothing here is used by optkit itself: it reads and writes safetensors with the standard library
and runs the Llama-family forward pass (Llama incl. llama3 rope scaling, Mistral, Qwen2 qkv bias,
Qwen3 q/k RMSNorm, GQA, tied embeddings) and Gemma 2 / Gemma 3 (text) in plain PyTorch, in fp32,
written from the published model equations: (1 + w) RMSNorm before and after each sub-block,
GeGLU with tanh GELU, embeddings scaled by sqrt(hidden) rounded to the embedding's dtype, scores
scaled by query_pre_attn_scalar^-1/2 and soft-capped before the mask, sliding layers interleaved
with global ones (layer_types or the sliding_window_pattern), Gemma 3's local RoPE base for the
sliding layers, and the final logit soft-cap; Phi-3 / Phi-4: q/k/v read from one qkv_proj and
gate/up from one gate_up_proj, RoPE on the first partial_rotary_factor of each head's dims, and
LongRoPE (each rotated pair's wavelength stretched by the short factors, or by the long ones when
the sequence is longer than original_max_position_embeddings, cos and sin times the attention
factor); and the mixtures of experts of Mixtral, Qwen2-MoE
(with its sigmoid-gated shared expert) and Qwen3-MoE: a softmax router (fp32), the top-k experts' SwiGLUs weighted by their probabilities,
renormalized to sum to 1 where the config says so, computed here densely (every expert on every
token, the unchosen ones weighted 0).
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
        self.qkv_bias = self.arch in ("Qwen2ForCausalLM", "Qwen2MoeForCausalLM") or d.get("attention_bias", False)
        self.qk_norm = self.arch == "Qwen3ForCausalLM"
        self.window = d.get("sliding_window") if self.arch == "MistralForCausalLM" else None
        if self.arch == "MixtralForCausalLM":
            self.window = d.get("sliding_window")
        self.qk_norm = self.qk_norm or self.arch == "Qwen3MoeForCausalLM"
        self.experts = 0
        self.moe_layers = [False] * self.layers
        if self.arch == "MixtralForCausalLM":
            self.experts, self.topk = d["num_local_experts"], d["num_experts_per_tok"]
            self.expert_inter, self.norm_topk = self.inter, True
            self.moe_layers = [True] * self.layers
        elif self.arch in ("Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM"):
            self.experts, self.topk = d["num_experts"], d["num_experts_per_tok"]
            self.expert_inter, self.norm_topk = d["moe_intermediate_size"], d.get("norm_topk_prob", False)
            step, dense = d.get("decoder_sparse_step", 1), d.get("mlp_only_layers") or []
            self.moe_layers = [i not in dense and (i + 1) % step == 0 for i in range(self.layers)]
        self.shared_inter = d.get("shared_expert_intermediate_size", 0) if self.arch == "Qwen2MoeForCausalLM" else 0
        self.gemma = self.arch in ("Gemma2ForCausalLM", "Gemma3ForCausalLM")
        self.fused = self.arch == "Phi3ForCausalLM"
        self.rotary_dim = int(self.head_dim * d.get("partial_rotary_factor", 1.0))
        self.long_after = None  # LongRoPE: the sequence length past which the long factors apply
        self.attention_factor = 1.0
        if self.fused:
            self.window = d.get("sliding_window")
            s = self.scaling or {}
            if s.get("rope_type", s.get("type")) in ("longrope", "su"):
                self.long_after = d.get("original_max_position_embeddings",
                                        s.get("original_max_position_embeddings", 4096))
                extension = d["max_position_embeddings"] / self.long_after
                self.attention_factor = s.get("attention_factor") or (
                    1.0 if extension <= 1 else math.sqrt(1 + math.log(extension) / math.log(self.long_after)))
        self.windows = [self.window] * self.layers  # per layer; None: global
        self.local_theta = None
        self.norm_offset = 0.0
        self.scale = self.head_dim ** -0.5
        self.attn_cap = self.final_cap = None
        if self.gemma:
            gemma2 = self.arch == "Gemma2ForCausalLM"
            self.tied = d.get("tie_word_embeddings", True)
            self.norm_offset = 1.0
            self.qk_norm = not gemma2
            self.scale = d.get("query_pre_attn_scalar", 256) ** -0.5
            self.attn_cap = d.get("attn_logit_softcapping", 50.0 if gemma2 else None)
            self.final_cap = d.get("final_logit_softcapping", 30.0 if gemma2 else None)
            pattern = 2 if gemma2 else d.get("sliding_window_pattern", 6)
            types = d.get("layer_types") or [
                "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(self.layers)]
            window = d.get("sliding_window", 4096)
            self.windows = [window if t == "sliding_attention" else None for t in types]
            if not gemma2:
                self.theta = d.get("rope_theta", 1e6)
                self.local_theta = d.get("rope_local_base_freq", 10000.0)


def load_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        return Config(json.load(f))


def inverse_frequencies(cfg, local=False, length=0):
    """RoPE's inverse frequencies for a sequence of `length` tokens (LongRoPE picks its factors by it)."""
    theta = cfg.local_theta if local else cfg.theta
    dim = cfg.rotary_dim
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    s = None if local else cfg.scaling
    if cfg.long_after is not None:
        factors = s["long_factor"] if length > cfg.long_after else s["short_factor"]
        return (inv / torch.tensor(factors, dtype=torch.float64)).float()
    if s and s.get("rope_type", s.get("type")) == "linear":
        return (inv / s["factor"]).float()
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


def rms_norm(x, w, eps, offset=0.0):
    """Llama: x̂·w; Gemma (offset 1): x̂·(1 + w)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (offset + w)


def soft_cap(x, cap):
    return cap * torch.tanh(x / cap) if cap else x


def rotate(x, cos, sin):
    """RoPE on the first cos.shape[-1] dims of x (all of them unless partial); the rest pass."""
    dim = cos.shape[-1]
    x, rest = x[..., :dim], x[..., dim:]
    half = dim // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return torch.cat((x * cos + rotated * sin, rest), dim=-1)


def router_name(cfg, i):
    return f"model.layers.{i}." + ("block_sparse_moe.gate" if cfg.arch == "MixtralForCausalLM" else "mlp.gate")


def expert_names(cfg, i, e):
    """(gate, up, down) of expert e in layer i."""
    if cfg.arch == "MixtralForCausalLM":
        p = f"model.layers.{i}.block_sparse_moe.experts.{e}."
        return p + "w1", p + "w3", p + "w2"
    p = f"model.layers.{i}.mlp.experts.{e}."
    return p + "gate_proj", p + "up_proj", p + "down_proj"


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
    embed_dtype = W["model.embed_tokens.weight"].dtype
    W = {k: v.to(dtype) for k, v in W.items()}
    B, T = ids.shape
    x = W["model.embed_tokens.weight"][ids]
    if cfg.gemma:  # sqrt(hidden) as a tensor of the embedding's dtype, as transformers makes it
        x = x * torch.tensor(cfg.hidden ** 0.5, dtype=embed_dtype).to(dtype)
    pos = torch.arange(T, dtype=dtype)

    def rope_table(local):
        freqs = torch.outer(pos, inverse_frequencies(cfg, local, T).to(dtype))
        factor = 1.0 if local else cfg.attention_factor
        return torch.cat((freqs, freqs), -1).cos() * factor, torch.cat((freqs, freqs), -1).sin() * factor

    rope = {False: rope_table(False)}
    if cfg.local_theta:
        rope[True] = rope_table(True)

    def mask_of(window):
        mask = torch.full((T, T), float("-inf"), dtype=dtype).triu(1)
        if window:
            mask = mask + torch.full((T, T), float("-inf"), dtype=dtype).tril(-window)
        return mask

    def norm(h, name):
        return rms_norm(h, W[name], cfg.eps, cfg.norm_offset)

    group = cfg.heads // cfg.kv_heads
    for i in range(cfg.layers):
        p = f"model.layers.{i}."
        h = norm(x, p + "input_layernorm.weight")

        def proj(name, n):
            y = linear(h, W[p + f"self_attn.{name}.weight"])
            if cfg.qkv_bias:
                y = y + W[p + f"self_attn.{name}.bias"]
            return y.view(B, T, n, cfg.head_dim).transpose(1, 2)

        if cfg.fused:  # Phi-3: q's rows, then k's, then v's
            qkv = linear(h, W[p + "self_attn.qkv_proj.weight"])
            qd, kvd = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
            q, k, v = (t.reshape(B, T, -1, cfg.head_dim).transpose(1, 2)
                       for t in (qkv[..., :qd], qkv[..., qd:qd + kvd], qkv[..., qd + kvd:]))
        else:
            q, k, v = proj("q_proj", cfg.heads), proj("k_proj", cfg.kv_heads), proj("v_proj", cfg.kv_heads)
        if cfg.qk_norm:
            q = norm(q, p + "self_attn.q_norm.weight")
            k = norm(k, p + "self_attn.k_norm.weight")
        cos, sin = rope[bool(cfg.local_theta and cfg.windows[i])]
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k = k.repeat_interleave(group, 1)
        v = v.repeat_interleave(group, 1)
        att = soft_cap((q @ k.transpose(-1, -2)) * cfg.scale, cfg.attn_cap) + mask_of(cfg.windows[i])
        o = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, cfg.heads * cfg.head_dim)
        a = linear(o, W[p + "self_attn.o_proj.weight"])
        if cfg.gemma:
            x = x + norm(a, p + "post_attention_layernorm.weight")
            h = norm(x, p + "pre_feedforward_layernorm.weight")
        else:
            x = x + a
            h = norm(x, p + "post_attention_layernorm.weight")
        if cfg.moe_layers[i]:
            probs = linear(h, W[router_name(cfg, i) + ".weight"]).float().softmax(-1)
            top, chosen = probs.topk(cfg.topk, -1)
            if cfg.norm_topk:
                top = top / top.sum(-1, keepdim=True)
            weight = torch.zeros_like(probs).scatter(-1, chosen, top).to(dtype)  # [B, T, experts]
            m = 0
            for e in range(cfg.experts):
                gate, up, down = (W[n + ".weight"] for n in expert_names(cfg, i, e))
                y = linear(torch.nn.functional.silu(linear(h, gate)) * linear(h, up), down)
                m = m + weight[..., e : e + 1] * y
            if cfg.shared_inter:  # Qwen2-MoE: sigmoid(h·g) · shared_expert(h) on every token
                s = p + "mlp.shared_expert."
                y = linear(torch.nn.functional.silu(linear(h, W[s + "gate_proj.weight"])) *
                           linear(h, W[s + "up_proj.weight"]), W[s + "down_proj.weight"])
                m = m + torch.sigmoid(linear(h, W[p + "mlp.shared_expert_gate.weight"])) * y
        elif cfg.fused:  # Phi-3: gate_up_proj's first half is the gate, the second the up projection
            g, u = linear(h, W[p + "mlp.gate_up_proj.weight"]).chunk(2, dim=-1)
            m = linear(u * torch.nn.functional.silu(g), W[p + "mlp.down_proj.weight"])
        else:
            g = linear(h, W[p + "mlp.gate_proj.weight"])
            g = torch.nn.functional.gelu(g, approximate="tanh") if cfg.gemma else torch.nn.functional.silu(g)
            m = linear(g * linear(h, W[p + "mlp.up_proj.weight"]), W[p + "mlp.down_proj.weight"])
        x = x + (norm(m, p + "post_feedforward_layernorm.weight") if cfg.gemma else m)
    x = norm(x, "model.norm.weight")
    head = W["model.embed_tokens.weight"] if cfg.tied else W["lm_head.weight"]
    logits = soft_cap(linear(x, head), cfg.final_cap)
    return logits[0] if single else logits


def init_weights(cfg, generator, std=0.02):
    """Random weights of every tensor the architecture names (fp32)."""
    shapes = {"model.embed_tokens.weight": (cfg.vocab, cfg.hidden), "model.norm.weight": (cfg.hidden,)}
    if not cfg.tied:
        shapes["lm_head.weight"] = (cfg.vocab, cfg.hidden)
    q, kv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    for i in range(cfg.layers):
        p = f"model.layers.{i}."
        if cfg.gemma:
            shapes.update({p + "pre_feedforward_layernorm.weight": (cfg.hidden,),
                           p + "post_feedforward_layernorm.weight": (cfg.hidden,)})
        shapes.update({
            p + "input_layernorm.weight": (cfg.hidden,),
            p + "post_attention_layernorm.weight": (cfg.hidden,),
            p + "self_attn.q_proj.weight": (q, cfg.hidden),
            p + "self_attn.k_proj.weight": (kv, cfg.hidden),
            p + "self_attn.v_proj.weight": (kv, cfg.hidden),
            p + "self_attn.o_proj.weight": (cfg.hidden, q),
        })
        if cfg.moe_layers[i]:
            shapes[router_name(cfg, i) + ".weight"] = (cfg.experts, cfg.hidden)
            for e in range(cfg.experts):
                gate, up, down = expert_names(cfg, i, e)
                shapes.update({gate + ".weight": (cfg.expert_inter, cfg.hidden),
                               up + ".weight": (cfg.expert_inter, cfg.hidden),
                               down + ".weight": (cfg.hidden, cfg.expert_inter)})
            if cfg.shared_inter:
                s = p + "mlp.shared_expert."
                shapes.update({s + "gate_proj.weight": (cfg.shared_inter, cfg.hidden),
                               s + "up_proj.weight": (cfg.shared_inter, cfg.hidden),
                               s + "down_proj.weight": (cfg.hidden, cfg.shared_inter),
                               p + "mlp.shared_expert_gate.weight": (1, cfg.hidden)})
        elif cfg.fused:
            for name in ("q_proj", "k_proj", "v_proj"):
                del shapes[p + f"self_attn.{name}.weight"]
            shapes.update({p + "self_attn.qkv_proj.weight": (q + 2 * kv, cfg.hidden),
                           p + "mlp.gate_up_proj.weight": (2 * cfg.inter, cfg.hidden),
                           p + "mlp.down_proj.weight": (cfg.hidden, cfg.inter)})
        else:
            shapes.update({p + "mlp.gate_proj.weight": (cfg.inter, cfg.hidden),
                           p + "mlp.up_proj.weight": (cfg.inter, cfg.hidden),
                           p + "mlp.down_proj.weight": (cfg.hidden, cfg.inter)})
        if cfg.qkv_bias:
            shapes.update({p + "self_attn.q_proj.bias": (q,), p + "self_attn.k_proj.bias": (kv,),
                           p + "self_attn.v_proj.bias": (kv,)})
        if cfg.qk_norm:
            shapes.update({p + "self_attn.q_norm.weight": (cfg.head_dim,), p + "self_attn.k_norm.weight": (cfg.head_dim,)})
    W = {}
    for name, shape in shapes.items():
        if name.endswith("norm.weight"):  # the gain near 1, as stored: Gemma stores w of 1 + w
            W[name] = 1.0 - cfg.norm_offset + 0.1 * torch.randn(shape, generator=generator)
        elif name.endswith(".bias"):
            W[name] = 0.1 * torch.randn(shape, generator=generator)
        else:
            W[name] = std * torch.randn(shape, generator=generator)
    return W
