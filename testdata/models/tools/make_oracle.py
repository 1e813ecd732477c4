#!/usr/bin/python3
"""Writes the logit oracle that optkit's CPU runtime is tested against.

    /usr/bin/python3 testdata/models/tools/make_oracle.py

1. Small random-weight models of each supported architecture variant (testdata/models/oracle/*):
   Llama with tied embeddings, Mistral with a sliding window, Qwen2 with q/k/v bias, Qwen3 with q/k
   norms and an explicit head_dim, in F32 / F16 / BF16 storage.
2. For those and the trained tiny-base model, fp32 logits of the reference forward pass
   (hf_reference.py, plain PyTorch) on fixed prompts, stored next to the model as
   oracle_logits.safetensors: prompt.<i>.ids (I32) and prompt.<i>.logits (F32 [T, vocab]).
3. For tiny-base, the perplexity of llama-perplexity's protocol on the English held-out text at
   ctx 128 and on its first 4 windows of 64 tokens (oracle_perplexity.json), from the reference
   encoder and forward pass in float64. `make_oracle.py --perplexity` writes only this file.
4. For the models stored in BF16 (llama-tied, qwen3-qknorm, tiny-base), the logits of the same
   prompts with every linear layer's input rounded to bfloat16 (optkit's --activations bf16):
   oracle_logits_bf16_activations.safetensors. `make_oracle.py --bf16-activations` writes only these.
5. `make_oracle.py --architectures` writes only the later families' models and logits
   (ARCHITECTURES: Gemma 2 with soft-caps, Gemma 3 with local RoPE, Mixtral, Qwen3-MoE and
   Qwen2-MoE mixtures of experts, Phi-3 with LongRoPE), each from its own seed, so
   the files above stay as they are, and for each the reference's greedy continuation of a prompt
   (oracle_greedy.safetensors) and a byte-level tokenizer, so that every command runs on them.
   `--architectures NAME...` writes only those.
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
# Issue 41's families: three layers, so sliding layers sit on both sides of a global one; a
# window of 5 inside every longer prompt; soft-caps small enough to bend these random weights' scores.
ARCHITECTURES = {
    "gemma2-softcap": ({"architectures": ["Gemma2ForCausalLM"], "hidden_size": 48, "intermediate_size": 96,
                        "num_hidden_layers": 3, "num_key_value_heads": 2, "head_dim": 16,
                        "query_pre_attn_scalar": 24, "attn_logit_softcapping": 1.0, "final_logit_softcapping": 2.0,
                        "sliding_window": 5, "hidden_activation": "gelu_pytorch_tanh", "hidden_act": None,
                        "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
                        "tie_word_embeddings": True}, torch.bfloat16, 0.15),
    "gemma3-local": ({"architectures": ["Gemma3ForCausalLM"], "hidden_size": 48, "intermediate_size": 96,
                      "num_hidden_layers": 3, "num_key_value_heads": 1, "head_dim": 16,
                      "query_pre_attn_scalar": 16, "sliding_window": 5, "sliding_window_pattern": 2,
                      "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
                      "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "final_logit_softcapping": None,
                      "attn_logit_softcapping": None, "hidden_activation": "gelu_pytorch_tanh", "hidden_act": None,
                      "tie_word_embeddings": True}, torch.float16, 0.08),
    # 6 experts, top-2 (renormalized), on every layer.
    "mixtral-moe": ({"architectures": ["MixtralForCausalLM"], "num_key_value_heads": 2, "intermediate_size": 48,
                     "num_local_experts": 6, "num_experts_per_tok": 2, "rope_theta": 1000000.0,
                     "sliding_window": None}, torch.bfloat16, 0.15),
    # 8 experts, top-3 not renormalized, layer 1 a dense MLP (mlp_only_layers), q/k norms.
    "qwen3-moe": ({"architectures": ["Qwen3MoeForCausalLM"], "num_hidden_layers": 3, "num_key_value_heads": 2,
                   "head_dim": 16, "num_experts": 8, "num_experts_per_tok": 3, "moe_intermediate_size": 32,
                   "norm_topk_prob": False, "decoder_sparse_step": 1, "mlp_only_layers": [1],
                   "rope_theta": 1000000.0}, torch.float32, 0.15),
    # q/k/v bias, 4 experts, top-2 not renormalized, and the shared expert beside them.
    "qwen2-moe": ({"architectures": ["Qwen2MoeForCausalLM"], "num_key_value_heads": 2, "num_experts": 4,
                   "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 64,
                   "norm_topk_prob": False, "decoder_sparse_step": 1, "mlp_only_layers": []}, torch.bfloat16, 0.15),
    # Phi-3 / Phi-4-mini: fused qkv_proj and gate_up_proj, RoPE on half of each head's dims, LongRoPE
    # switching to the long factors past 16 tokens (the two longer prompts; greedy decoding
    # crosses it) with an attention factor of sqrt(1 + ln 4 / ln 16), a window of 24.
    "phi3-longrope": ({"architectures": ["Phi3ForCausalLM"], "num_key_value_heads": 2, "partial_rotary_factor": 0.5,
                       "max_position_embeddings": 64, "original_max_position_embeddings": 16, "sliding_window": 24,
                       "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.3, 2.1, 3.7],
                                        "long_factor": [1.5, 4.0, 9.0, 20.0]}}, torch.bfloat16, 0.15),
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


def write_greedy_oracle(model_dir, new_tokens=32):
    """oracle_greedy.safetensors: `prompt` (I32, oracle prompt 1) and the `tokens` (I32) the reference
    picks by argmax for `new_tokens` steps, each step recomputed over the whole sequence, and
    `margin` (F32): each step's gap between the best and the second-best logit."""
    cfg = ref.load_config(model_dir)
    W = ref.read_safetensors(os.path.join(model_dir, "model.safetensors"))
    prompt = ref.read_safetensors(os.path.join(model_dir, "oracle_logits.safetensors"))["prompt.1.ids"].tolist()
    ids, margins = list(prompt), []
    with torch.no_grad():
        for _ in range(new_tokens):
            top = ref.forward(cfg, W, ids)[-1].topk(2)
            ids.append(int(top.indices[0]))
            margins.append(float(top.values[0] - top.values[1]))
    ref.write_safetensors(os.path.join(model_dir, "oracle_greedy.safetensors"),
                          {"prompt": torch.tensor(prompt, dtype=torch.int32),
                           "tokens": torch.tensor(ids[len(prompt):], dtype=torch.int32),
                           "margin": torch.tensor(margins, dtype=torch.float32)})
    print(model_dir, "greedy", ids[len(prompt):], "smallest margin", min(margins))


def write_bf16_activation_oracle(model_dir):
    """The prompts of oracle_logits.safetensors again, each linear layer's input rounded to bf16."""
    cfg = ref.load_config(model_dir)
    W = ref.read_safetensors(os.path.join(model_dir, "model.safetensors"))
    fp32 = ref.read_safetensors(os.path.join(model_dir, "oracle_logits.safetensors"))
    out = {}
    with torch.no_grad():
        for name, ids in fp32.items():
            if name.endswith(".ids"):
                out[name] = ids
                logits = ref.forward(cfg, W, ids.tolist(), bf16_inputs=True).float().contiguous()
                out[name[: -len("ids")] + "logits"] = logits
    ref.write_safetensors(os.path.join(model_dir, "oracle_logits_bf16_activations.safetensors"), out)
    print(model_dir, {k: list(v.shape) for k, v in out.items() if k.endswith("logits")})


BF16_MODELS = ("oracle/llama-tied", "oracle/qwen3-qknorm", "tiny-base")


def llama_perplexity(cfg, W, ids, bos, ctx, windows):
    """llama-perplexity's default protocol on BOS-first token ids: whole windows of ctx tokens,
    each window's first token replaced by BOS, the tokens after positions ctx/2 .. ctx-2 scored.
    Returns (perplexity, its standard error as llama-perplexity prints it, scored tokens)."""
    nlls = []
    with torch.no_grad():
        for w in range(windows):
            window = list(ids[w * ctx : (w + 1) * ctx])
            window[0] = bos
            logp = ref.forward(cfg, W, window, dtype=torch.float64).log_softmax(-1)
            first = ctx // 2
            targets = torch.tensor(window[first + 1 :])
            nlls += (-logp[first : ctx - 1].gather(1, targets[:, None])).flatten().tolist()
    n = len(nlls)
    mean = sum(nlls) / n
    var = sum(x * x for x in nlls) / n - mean * mean
    ppl = math.exp(mean)
    return ppl, math.sqrt(var / (n - 1)) * ppl, n


def write_perplexity_oracle(model_dir, text_path):
    """llama-perplexity figures from the reference forward pass and the reference BPE encoder of
    train_tiny_models.py: the whole file at ctx 128 and its first 4 windows at ctx 64."""
    import train_tiny_models as trainer

    with open(os.path.join(model_dir, "tokenizer.json")) as f:
        tok = json.load(f)
    vocab = tok["model"]["vocab"]
    merges = [tuple(m.split(" ")) for m in tok["model"]["merges"]]
    bos = next(a["id"] for a in tok["added_tokens"] if a["content"] == "<|begin_of_text|>")
    with open(text_path, encoding="utf-8") as f:
        ids = [bos] + trainer.encode(f.read(), vocab, merges)
    cfg = ref.load_config(model_dir)
    W = ref.read_safetensors(os.path.join(model_dir, "model.safetensors"))
    result = {"text": os.path.relpath(text_path, MODELS), "text_tokens": len(ids), "runs": []}
    for ctx, windows in ((128, len(ids) // 128), (64, 4)):
        ppl, stderr, scored = llama_perplexity(cfg, W, ids, bos, ctx, windows)
        result["runs"].append({"ctx": ctx, "windows": windows, "scored_tokens": scored, "perplexity": ppl,
                               "perplexity_stderr": stderr})
    with open(os.path.join(model_dir, "oracle_perplexity.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(model_dir, result)


def write_byte_tokenizer(model_dir, vocab):
    """A byte-level BPE without merges: token b is byte b, token 256 is <bos>, the rest <unused_i>,
    so that optkit's commands (eval, compress, serve-deltas) run on these tiny random models."""
    import train_tiny_models as trainer

    alphabet = trainer.byte_to_unicode()
    added = [{"id": 256, "content": "<bos>", "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True}]
    added += [{"id": i, "content": f"<unused_{i}>", "single_word": False, "lstrip": False, "rstrip": False,
               "normalized": False, "special": True} for i in range(257, vocab)]
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                                                    {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<bos>": {"id": "<bos>", "ids": [256], "tokens": ["<bos>"]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {alphabet[b]: b for b in range(256)}, "merges": []},
    }
    with open(os.path.join(model_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    with open(os.path.join(model_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<bos>", "add_bos_token": True, "model_max_length": 256}, f, indent=1)
        f.write("\n")


def write_model(name, config, dtype, std, generator):
    cfg = ref.Config(config)
    W = ref.init_weights(cfg, generator, std=std)
    path = os.path.join(MODELS, "oracle", name)
    os.makedirs(path, exist_ok=True)
    ref.write_safetensors(os.path.join(path, "model.safetensors"), {k: v.to(dtype) for k, v in W.items()})
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
        f.write("\n")
    write_oracle(path, generator)
    return path


def main():
    if sys.argv[1:2] == ["--architectures"]:
        for seed, (name, (overrides, dtype, std)) in enumerate(ARCHITECTURES.items(), start=41):
            if sys.argv[2:] and name not in sys.argv[2:]:
                continue
            config = {k: v for k, v in dict(BASE, **overrides, torch_dtype=DTYPE_NAMES[dtype]).items() if v is not None}
            path = write_model(name, config, dtype, std, torch.Generator().manual_seed(seed))
            write_greedy_oracle(path)
            write_byte_tokenizer(path, config["vocab_size"])
        return
    if sys.argv[1:] == ["--perplexity"]:
        write_perplexity_oracle(os.path.join(MODELS, "tiny-base"),
                                os.path.join(MODELS, "..", "corpora", "english.heldout.txt"))
        return
    if sys.argv[1:] == ["--bf16-activations"]:
        for name in BF16_MODELS:
            write_bf16_activation_oracle(os.path.join(MODELS, name))
        return
    generator = torch.Generator().manual_seed(1234)
    for name, (overrides, dtype) in VARIANTS.items():
        write_model(name, dict(BASE, **overrides, torch_dtype=DTYPE_NAMES[dtype]), dtype, 0.08, generator)
    write_oracle(os.path.join(MODELS, "tiny-base"), generator)
    write_perplexity_oracle(os.path.join(MODELS, "tiny-base"),
                            os.path.join(MODELS, "..", "corpora", "english.heldout.txt"))
    for name in BF16_MODELS:
        write_bf16_activation_oracle(os.path.join(MODELS, name))


if __name__ == "__main__":
    main()
