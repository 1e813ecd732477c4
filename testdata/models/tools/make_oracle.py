#!/usr/bin/python3
"""Writes the logit oracle that optkit's CPU runtime is tested against.

    /usr/bin/python3 testdata/models/tools/make_oracle.py

1. Small random-weight models of each supported architecture variant (testdata/models/oracle/*):
   Llama with tied embeddings, Mistral with a sliding window, Qwen2 with q/k/v bias, Qwen3 with q/k
   norms and an explicit head_dim, in F32 / F16 / BF16 storage.
2. For those and the trained tiny-base model, fp32 logits of the reference forward pass
   (hf_reference.py, plain PyTorch) on fixed prompts, stored next to the model as
   oracle_logits.safetensors: prompt.<i>.ids (I32) and prompt.<i>.logits (F32 [T, vocab]).
3. For tiny-base, the perplexity of the llama.cpp method on 4 windows of 64 tokens of the English
   held-out text (oracle_perplexity.json), from the reference encoder and forward pass.
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as ref  # noqa: E402

MODELS = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

VARIANTS = {
    "llama-tied": ({"architectures": ["LlamaForCausalLM"], "tie_word_embeddings": True, "num_key_value_heads": 2,
                    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                     "high_freq_factor": 4.0, "original_max_position_embeddings": 32}},
                   torch.bfloat16),
    "mistral-window": ({"architectures": ["MistralForCausalLM"], "sliding_window": 6, "num_key_value_heads": 1,
                        "rope_theta": 1000000.0}, torch.float16),
    "qwen2-bias": ({"architectures": ["Qwen2ForCausalLM"], "num_key_value_heads": 2, "tie_word_embeddings": True},
                   torch.float32),
    "qwen3-qknorm": ({"architectures": ["Qwen3ForCausalLM"], "num_key_value_heads": 2, "head_dim": 24,
                      "rms_norm_eps": 1e-6}, torch.bfloat16),
}
BASE = {"vocab_size": 257, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
        "num_attention_heads": 4, "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "hidden_act": "silu", "tie_word_embeddings": False}
DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


def prompts(vocab, generator):
    return [torch.randint(0, vocab, (n,), generator=generator).tolist() for n in (1, 7, 19, 40)]


def write_oracle(model_dir, generator):
    cfg = ref.load_config(model_dir)
    W = ref.read_safetensors(os.path.join(model_dir, "model.safetensors"))
    out = {}
    with torch.no_grad():
        for i, ids in enumerate(prompts(cfg.vocab, generator)):
            out[f"prompt.{i}.ids"] = torch.tensor(ids, dtype=torch.int32)
            out[f"prompt.{i}.logits"] = ref.forward(cfg, W, ids).float().contiguous()
    ref.write_safetensors(os.path.join(model_dir, "oracle_logits.safetensors"), out)
    print(model_dir, {k: list(v.shape) for k, v in out.items() if k.endswith("logits")})


def write_perplexity_oracle(model_dir, text_path, ctx=64, windows=4):
    """llama.cpp-method perplexity (BOS replaces each window's first token, second half scored)
    from the reference forward pass and the reference BPE encoder of train_tiny_models.py."""
    import train_tiny_models as trainer

    with open(os.path.join(model_dir, "tokenizer.json")) as f:
        tok = json.load(f)
    vocab = tok["model"]["vocab"]
    merges = [tuple(m.split(" ")) for m in tok["model"]["merges"]]
    bos = next(a["id"] for a in tok["added_tokens"] if a["content"] == "<|begin_of_text|>")
    with open(text_path, encoding="utf-8") as f:
        ids = trainer.encode(f.read(), vocab, merges)
    cfg = ref.load_config(model_dir)
    W = ref.read_safetensors(os.path.join(model_dir, "model.safetensors"))
    nll, count = 0.0, 0
    with torch.no_grad():
        for w in range(windows):
            window = list(ids[w * ctx : (w + 1) * ctx])
            targets = torch.tensor(window[ctx // 2 :])
            window[0] = bos
            logp = ref.forward(cfg, W, window).double().log_softmax(-1)
            nll -= logp[ctx // 2 - 1 : ctx - 1].gather(1, targets[:, None]).sum().item()
            count += len(targets)
    result = {"text": os.path.relpath(text_path, MODELS), "ctx": ctx, "windows": windows, "text_tokens": len(ids),
              "scored_tokens": count, "perplexity": math.exp(nll / count)}
    with open(os.path.join(model_dir, "oracle_perplexity.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(model_dir, result)


def main():
    generator = torch.Generator().manual_seed(1234)
    for name, (overrides, dtype) in VARIANTS.items():
        config = dict(BASE, **overrides, torch_dtype=DTYPE_NAMES[dtype])
        cfg = ref.Config(config)
        W = ref.init_weights(cfg, generator, std=0.08)
        path = os.path.join(MODELS, "oracle", name)
        os.makedirs(path, exist_ok=True)
        ref.write_safetensors(os.path.join(path, "model.safetensors"), {k: v.to(dtype) for k, v in W.items()})
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(config, f, indent=1)
            f.write("\n")
        write_oracle(path, generator)
    write_oracle(os.path.join(MODELS, "tiny-base"), generator)
    write_perplexity_oracle(os.path.join(MODELS, "tiny-base"),
                            os.path.join(MODELS, "..", "corpora", "english.heldout.txt"))


if __name__ == "__main__":
    main()
