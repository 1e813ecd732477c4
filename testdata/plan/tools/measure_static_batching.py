#!/usr/bin/env python3
"""Ground truth for plan's static-batching estimates: TTFT and TPOT measured with PyTorch on a GPU.

A plain PyTorch decoder (no Hugging Face model code) with the shapes of a preset in
lib/perf/model_arch.cpp and random BF16 weights — timing does not depend on the values. It runs
the way serving engines run a step:
  - prefill: one eager forward over batch x isl tokens with fused QKV and gate/up products, RoPE,
    causal scaled-dot-product attention (flash / cuDNN / memory-efficient, never the math
    fallback), writing the KV cache, then the LM head and greedy sampling on each sequence's last
    token. TTFT = that forward's time.
  - decode: one token per sequence attending to the cache, captured as a CUDA graph (as vLLM and
    SGLang do for decode). The step time is linear in the KV length, so the mean over the OSL - 1
    steps is Simpson's rule over the first, middle and last step. TPOT = that mean.
Times are CUDA-event medians over repeats after warm-ups. Output: one JSON file of points.

Usage: python3 measure_static_batching.py OUT.json [--quick]
Needs torch >= 2.5 with CUDA; a test tool only, never a dependency of optkit.
"""
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# The shapes of lib/perf/model_arch.cpp's presets (kept in step by hand: the C++ test reads the
# preset by name and checks that the layer count and widths recorded here agree).
MODELS = {
    "llama-3.1-8b": dict(layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, intermediate=14336,
                         vocab=128256, qkv_bias=False),
    "qwen2.5-7b": dict(layers=28, hidden=3584, heads=28, kv_heads=4, head_dim=128, intermediate=18944,
                       vocab=152064, qkv_bias=True),
}

# (batch, isl, osl): latency-bound single requests to throughput-bound batches.
POINTS = [(1, 128, 256), (1, 1024, 256), (1, 4096, 256), (4, 1024, 256), (8, 2048, 256), (16, 512, 256),
          (16, 2048, 256), (32, 1024, 256), (64, 256, 256), (64, 1024, 256)]
QUICK_POINTS = [(1, 1024, 256), (16, 512, 256)]

FAST_ATTENTION = [SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]


class Decoder:
    def __init__(self, shape, device):
        torch.manual_seed(0)
        d = shape["hidden"]
        self.s = shape
        q_out = shape["heads"] * shape["head_dim"]
        kv_out = shape["kv_heads"] * shape["head_dim"]

        def w(*size):
            return (torch.randn(*size, device=device, dtype=torch.bfloat16) * 0.02)

        self.embed = w(shape["vocab"], d)
        self.lm_head = w(shape["vocab"], d)
        self.final_norm = torch.ones(d, device=device, dtype=torch.bfloat16)
        self.layers = []
        for _ in range(shape["layers"]):
            self.layers.append(dict(
                attn_norm=torch.ones(d, device=device, dtype=torch.bfloat16),
                qkv=w(q_out + 2 * kv_out, d),
                qkv_bias=w(q_out + 2 * kv_out) if shape["qkv_bias"] else None,
                o=w(d, q_out),
                mlp_norm=torch.ones(d, device=device, dtype=torch.bfloat16),
                gate_up=w(2 * shape["intermediate"], d),
                down=w(d, shape["intermediate"]),
            ))
        hd = shape["head_dim"]
        inv = 1.0 / (500000.0 ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))
        pos = torch.arange(0, 65536, device=device, dtype=torch.float32)
        freqs = torch.outer(pos, inv)
        self.cos = torch.cat([freqs, freqs], dim=-1).cos().to(torch.bfloat16)
        self.sin = torch.cat([freqs, freqs], dim=-1).sin().to(torch.bfloat16)

    def rope(self, x, cos, sin):
        # x: [B, heads, T, D]; rotate-half RoPE as Llama and Qwen use.
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def forward(self, tokens, start, cache_k, cache_v):
        """tokens [B, T]; writes the cache at [start, start+T); returns greedy next tokens [B]."""
        s = self.s
        b, t = tokens.shape
        h, kvh, hd = s["heads"], s["kv_heads"], s["head_dim"]
        positions = torch.arange(start, start + t, device=tokens.device)
        # gathered once per step, as engines do, not once per layer
        cos, sin = self.cos[positions][None, None], self.sin[positions][None, None]
        x = F.embedding(tokens, self.embed)
        end = start + t
        for i, layer in enumerate(self.layers):
            y = F.rms_norm(x, (x.shape[-1],), layer["attn_norm"], 1e-5)
            qkv = F.linear(y, layer["qkv"], layer["qkv_bias"])
            q, k, v = qkv.split([h * hd, kvh * hd, kvh * hd], dim=-1)
            q = self.rope(q.view(b, t, h, hd).transpose(1, 2), cos, sin)
            k = self.rope(k.view(b, t, kvh, hd).transpose(1, 2), cos, sin)
            v = v.view(b, t, kvh, hd).transpose(1, 2)
            cache_k[i, :, :, start:end] = k
            cache_v[i, :, :, start:end] = v
            with sdpa_kernel(FAST_ATTENTION):
                a = F.scaled_dot_product_attention(q, cache_k[i, :, :, :end], cache_v[i, :, :, :end],
                                                   is_causal=t > 1, enable_gqa=True)
            x = x + F.linear(a.transpose(1, 2).reshape(b, t, h * hd), layer["o"])
            y = F.rms_norm(x, (x.shape[-1],), layer["mlp_norm"], 1e-5)
            g, u = F.linear(y, layer["gate_up"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(g) * u, layer["down"])
        last = F.rms_norm(x[:, -1], (x.shape[-1],), self.final_norm, 1e-5)
        return F.linear(last, self.lm_head).argmax(dim=-1)


def timed_ms(fn, warmups, repeats):
    for _ in range(warmups):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end))
    return statistics.median(times), times


def measure(model, name, batch, isl, osl, device):
    s = model.s
    max_len = isl + osl
    cache_shape = (s["layers"], batch, s["kv_heads"], max_len, s["head_dim"])
    cache_k = torch.zeros(cache_shape, device=device, dtype=torch.bfloat16)
    cache_v = torch.zeros(cache_shape, device=device, dtype=torch.bfloat16)
    prompt = torch.randint(0, s["vocab"], (batch, isl), device=device)
    with torch.inference_mode():
        ttft, ttft_all = timed_ms(lambda: model.forward(prompt, 0, cache_k, cache_v), 2, 5)
        # Decode steps at the first, middle and last KV length, each a captured graph.
        step_ms = {}
        for kv_len in (isl + 1, isl + osl // 2, isl + osl - 1):
            token = torch.randint(0, s["vocab"], (batch, 1), device=device)
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(2):
                    model.forward(token, kv_len - 1, cache_k, cache_v)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                model.forward(token, kv_len - 1, cache_k, cache_v)
            step_ms[kv_len], _ = timed_ms(graph.replay, 3, 20)
            del graph
    first, middle, last = (step_ms[k] for k in sorted(step_ms))
    tpot = (first + 4 * middle + last) / 6
    del cache_k, cache_v
    torch.cuda.empty_cache()
    return dict(model=name, batch=batch, isl=isl, osl=osl, ttft_ms=round(ttft, 4), tpot_ms=round(tpot, 4),
                ttft_repeats_ms=[round(x, 4) for x in ttft_all],
                decode_step_ms={str(k): round(v, 4) for k, v in sorted(step_ms.items())})


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: measure_static_batching.py OUT.json [--quick]")
    out_path, quick = sys.argv[1], "--quick" in sys.argv[2:]
    device = torch.device("cuda")
    points = []
    started = time.time()
    for name, shape in MODELS.items():
        model = Decoder(shape, device)
        for batch, isl, osl in (QUICK_POINTS if quick else POINTS):
            point = measure(model, name, batch, isl, osl, device)
            print(json.dumps(point), flush=True)
            points.append(point)
        del model
        torch.cuda.empty_cache()
    result = dict(
        device=torch.cuda.get_device_name(0),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        method="plain PyTorch decoder, BF16, random weights; prefill eager, decode as CUDA graphs; "
               "TTFT = median prefill forward incl. LM head on the last token; TPOT = Simpson mean of "
               "graph-replayed decode steps at KV = isl+1, isl+osl/2, isl+osl-1",
        shapes=MODELS,
        seconds=round(time.time() - started, 1),
        points=points,
    )
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
