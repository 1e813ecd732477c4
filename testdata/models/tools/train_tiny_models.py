#!/usr/bin/python3
"""Trains optkit's tiny test models from text that Debian packages ship. Reproducible: fixed seeds.

    scripts/install-deps.sh --training   # python3-torch python3-regex fortunes wordnet-base ...
    /usr/bin/python3 testdata/models/tools/train_tiny_models.py [--quick]

Writes testdata/models/tiny-{base,code,licenses,glosses,quotes}/ (HF layout, bf16 safetensors, one
byte-level BPE tokenizer), testdata/corpora/<domain>.heldout.txt and testdata/models/training_report.json.
"""
import argparse
import collections
import glob
import gzip
import json
import math
import os
import sys
import time

import regex
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as ref  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODELS = os.path.join(ROOT, "models")
CORPORA = os.path.join(ROOT, "corpora")
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
VOCAB_SIZE = 2048
HELDOUT_BYTES = 24000
LIMITS = {"english": 1_400_000, "code": 600_000, "licenses": 300_000, "glosses": 600_000, "quotes": 600_000}
# Pre-training mixture of the base: mostly English prose, and some of every variant's domain, as a
# real base model has seen some code, licences and quotations before anyone fine-tunes it.
BASE_MIXTURE = {"english": 0.6, "code": 0.1, "licenses": 0.1, "glosses": 0.1, "quotes": 0.1}
BASE_LR = 3e-3
FINETUNE_LR = 2e-4  # a fine-tune moves the weights far less than pre-training did (1/15 of the base's peak)
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        return f.read()


def tidy(text):
    """Strips indentation and trailing blanks; keeps paragraph breaks."""
    lines = [ln.strip() for ln in text.replace("\r", "").split("\n")]
    return regex.sub(r"\n{3,}", "\n\n", "\n".join(lines))


def english():
    return [tidy(read(p)) for p in ["/usr/share/debian-reference/debian-reference.en.txt.gz",
                                    "/usr/share/doc/gnu-standards/standards.text.gz",
                                    "/usr/share/doc/gnu-standards/maintain.text.gz"]]


def code():
    return [read(p) for p in sorted(glob.glob("/usr/include/*.h"))]


def licenses():
    return [read(p) for p in sorted(glob.glob("/usr/share/common-licenses/*")) if os.path.isfile(p)]


def glosses():
    out = []
    for part in ["noun", "verb", "adj", "adv"]:
        for line in read(f"/usr/share/wordnet/data.{part}").split("\n"):
            if not line or line.startswith(" ") or "|" not in line:
                continue
            fields, gloss = line.split("|", 1)
            word = fields.split()[4].replace("_", " ")
            out.append(f"{word} ({part}): {gloss.strip()}")
    return ["\n".join(out[i : i + 4]) for i in range(0, len(out), 4)]


def quotes():
    names = ["fortunes", "wisdom", "literature", "people", "science", "humorists", "work", "politics", "education"]
    return [read(f"/usr/share/games/fortunes/{n}").replace("\n%\n", "\n\n") for n in names]


DOMAINS = {"english": english, "code": code, "licenses": licenses, "glosses": glosses, "quotes": quotes}
VARIANTS = {"code": "tiny-code", "licenses": "tiny-licenses", "glosses": "tiny-glosses", "quotes": "tiny-quotes"}


def split_domain(docs, limit):
    """Paragraph chunks; every 10th chunk is held out. Training text is capped at `limit` bytes."""
    chunks = [c for d in docs for c in regex.split(r"\n\s*\n", d) if c.strip()]
    train = "\n\n".join(c for i, c in enumerate(chunks) if i % 10 != 7)
    held = "\n\n".join(c for i, c in enumerate(chunks) if i % 10 == 7)
    return train[:limit], held[:HELDOUT_BYTES]


def byte_to_unicode():
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def train_bpe(text, merges_wanted):
    b2u = byte_to_unicode()
    words = collections.Counter("".join(b2u[b] for b in w.encode()) for w in regex.findall(LLAMA3_SPLIT, text))
    symbols = [list(w) for w in words]
    freq = list(words.values())
    pairs, where = collections.Counter(), collections.defaultdict(set)
    for i, s in enumerate(symbols):
        for a, b in zip(s, s[1:]):
            pairs[(a, b)] += freq[i]
            where[(a, b)].add(i)
    merges = []
    for _ in range(merges_wanted):
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]), default=None)
        if not best or best[1] < 2:
            break
        (a, b), _count = best
        merges.append((a, b))
        for i in list(where[(a, b)]):
            s, f = symbols[i], freq[i]
            for x, y in zip(s, s[1:]):
                pairs[(x, y)] -= f
            merged, j = [], 0
            while j < len(s):
                if j + 1 < len(s) and s[j] == a and s[j + 1] == b:
                    merged.append(a + b)
                    j += 2
                else:
                    merged.append(s[j])
                    j += 1
            symbols[i] = merged
            for x, y in zip(merged, merged[1:]):
                pairs[(x, y)] += f
                where[(x, y)].add(i)
        for key in [k for k, v in pairs.items() if v <= 0]:
            del pairs[key]
            where.pop(key, None)
    vocab = {b2u[b]: b for b in range(256)}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    return vocab, merges


def tokenizer_json(vocab, merges):
    base = len(vocab)
    added = [{"id": base + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(SPECIALS)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_SPLIT}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": SPECIALS[0], "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": SPECIALS[0], "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": SPECIALS[0], "type_id": 1}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {SPECIALS[0]: {"id": SPECIALS[0], "ids": [base], "tokens": [SPECIALS[0]]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }


def encode(text, vocab, merges):
    """Reference BPE encoder (slow, standard rank-based merging) used to tokenize training text."""
    b2u = byte_to_unicode()
    rank = {m: i for i, m in enumerate(merges)}
    cache, ids = {}, []
    for w in regex.findall(LLAMA3_SPLIT, text):
        if w not in cache:
            s = [b2u[b] for b in w.encode()]
            while len(s) > 1:
                best = min(range(len(s) - 1), key=lambda j: rank.get((s[j], s[j + 1]), math.inf))
                if (s[best], s[best + 1]) not in rank:
                    break
                s = s[:best] + [s[best] + s[best + 1]] + s[best + 2:]
            cache[w] = [vocab[t] for t in s]
        ids.extend(cache[w])
    return ids


def model_config(vocab_size):
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab_size,
        "hidden_size": 192, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 6,
        "num_key_value_heads": 2, "head_dim": 32, "max_position_embeddings": 1024, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "rope_scaling": {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 256},
        "tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False, "torch_dtype": "bfloat16",
        "bos_token_id": vocab_size - len(SPECIALS) - (VOCAB_SIZE - vocab_size), "eos_token_id": None,
    }


def batches(corpora, weights, seq, batch, generator):
    """Random windows; each window's corpus drawn with the given weights."""
    data = [torch.tensor(ids) for ids in corpora]
    p = torch.tensor(weights, dtype=torch.float64)
    while True:
        which = torch.multinomial(p, batch, replacement=True, generator=generator).tolist()
        windows = []
        for c in which:
            s = int(torch.randint(0, len(data[c]) - seq - 1, (1,), generator=generator))
            windows.append(data[c][s : s + seq + 1])
        chunk = torch.stack(windows)
        yield chunk[:, :-1], chunk[:, 1:]


def train(cfg, W, corpora, weights, steps, lr, seed, label, stream=None):
    """AdamW from W on random windows of the corpora, or on the (input, target) batches `stream` yields."""
    params = {k: v.clone().requires_grad_(True) for k, v in W.items()}
    decay = [p for k, p in params.items() if p.dim() == 2]
    no_decay = [p for k, p in params.items() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95))
    if stream is None:
        stream = batches(corpora, weights, 128, 16, torch.Generator().manual_seed(seed))
    warmup = max(1, steps // 20)
    start = time.time()
    for step in range(steps):
        scale = (step + 1) / warmup if step < warmup else 0.5 * (1 + math.cos(math.pi * (step - warmup) / (steps - warmup)))
        for g in opt.param_groups:
            g["lr"] = lr * (0.1 + 0.9 * scale)
        x, y = next(stream)
        loss = torch.nn.functional.cross_entropy(ref.forward(cfg, params, x).reshape(-1, cfg.vocab), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            print(f"[{label}] step {step}/{steps} loss {loss.item():.3f} ({time.time() - start:.0f}s)", flush=True)
    return {k: v.detach() for k, v in params.items()}


def perplexity(cfg, W, ids, ctx=128):
    """Mean NLL over non-overlapping windows (every token after the first of each window)."""
    windows = len(ids) // ctx
    x = torch.tensor(ids[: windows * ctx]).view(windows, ctx)
    with torch.no_grad():
        logp = ref.forward(cfg, W, x).log_softmax(-1)
    nll = -logp[:, :-1].gather(2, x[:, 1:, None]).mean().item()
    return math.exp(nll)


def save_model(path, cfg_dict, W, tok, tok_cfg):
    os.makedirs(path, exist_ok=True)
    ref.write_safetensors(os.path.join(path, "model.safetensors"), {k: v.to(torch.bfloat16) for k, v in W.items()})
    for name, obj in [("config.json", cfg_dict), ("tokenizer.json", tok), ("tokenizer_config.json", tok_cfg)]:
        with open(os.path.join(path, name), "w") as f:
            json.dump(obj, f, indent=1 if name != "tokenizer.json" else None, ensure_ascii=False)
            f.write("\n")


def committed_tokenizer():
    """vocab and merges of the committed tokenizer.json, as train_bpe returns them."""
    with open(os.path.join(MODELS, "tiny-base", "tokenizer.json"), encoding="utf-8") as f:
        model = json.load(f)["model"]
    return model["vocab"], [tuple(m.split(" ")) for m in model["merges"]]


def relative_delta(W, base):
    """||W_f - W_b|| / ||W_b|| over all matrices: how far a fine-tune moved from the base."""
    num = sum(float((W[k] - base[k]).pow(2).sum()) for k in W if W[k].dim() == 2)
    den = sum(float(base[k].pow(2).sum()) for k in W if W[k].dim() == 2)
    return math.sqrt(num / den)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="few steps, for checking the script")
    ap.add_argument("--base-steps", type=int, default=1500)
    ap.add_argument("--finetune-steps", type=int, default=300)
    ap.add_argument("--keep-tokenizer", action="store_true",
                    help="reuse the committed tokenizer.json and held-out texts instead of rebuilding them "
                         "(the code corpus depends on the machine's /usr/include)")
    args = ap.parse_args()
    if args.quick:
        args.base_steps, args.finetune_steps = 10, 5
    torch.manual_seed(0)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    split = {d: split_domain(fn(), LIMITS[d]) for d, fn in DOMAINS.items()}
    if args.keep_tokenizer:
        vocab, merges = committed_tokenizer()
        for d in split:
            with open(os.path.join(CORPORA, f"{d}.heldout.txt"), encoding="utf-8") as f:
                split[d] = (split[d][0], f.read())
    else:
        os.makedirs(CORPORA, exist_ok=True)
        for d, (_, held) in split.items():
            with open(os.path.join(CORPORA, f"{d}.heldout.txt"), "w") as f:
                f.write(held)
        tok_text = split["english"][0] + "".join(split[d][0][:150_000] for d in VARIANTS)
        vocab, merges = train_bpe(tok_text, VOCAB_SIZE - 256 - len(SPECIALS))
    print(f"tokenizer: {len(vocab)} entries, {len(merges)} merges", flush=True)
    vocab_size = len(vocab) + len(SPECIALS)
    tok = tokenizer_json(vocab, merges)
    cfg_dict = model_config(vocab_size)
    cfg_dict["bos_token_id"] = len(vocab)
    cfg_dict["eos_token_id"] = len(vocab) + SPECIALS.index("<|eot_id|>")
    tok_cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": SPECIALS[0], "eos_token": "<|eot_id|>",
               "add_bos_token": True, "model_max_length": 1024, "clean_up_tokenization_spaces": False,
               "chat_template": CHAT_TEMPLATE}
    cfg = ref.Config(cfg_dict)
    tokens = {d: (encode(tr, vocab, merges), encode(he, vocab, merges)) for d, (tr, he) in split.items()}
    base = train(cfg, ref.init_weights(cfg, torch.Generator().manual_seed(1)), [tokens[d][0] for d in BASE_MIXTURE],
                 list(BASE_MIXTURE.values()), args.base_steps, BASE_LR, 2, "base")
    base = {k: v.to(torch.bfloat16).float() for k, v in base.items()}
    save_model(os.path.join(MODELS, "tiny-base"), cfg_dict, base, tok, tok_cfg)
    report = {"params": sum(v.numel() for v in base.values()), "vocab_size": vocab_size, "merges": len(merges),
              "base_steps": args.base_steps, "base_mixture": BASE_MIXTURE, "base_lr": BASE_LR,
              "finetune_steps": args.finetune_steps, "finetune_lr": FINETUNE_LR, "batch": 16, "seq": 128,
              "train_tokens": {d: len(t[0]) for d, t in tokens.items()},
              "heldout_tokens": {d: len(t[1]) for d, t in tokens.items()}, "perplexity": {}, "relative_delta": {}}
    report["perplexity"]["tiny-base"] = {d: perplexity(cfg, base, t[1]) for d, t in tokens.items()}
    for i, (domain, name) in enumerate(VARIANTS.items()):
        W = train(cfg, base, [tokens[domain][0]], [1.0], args.finetune_steps, FINETUNE_LR, 10 + i, name)
        W = {k: v.to(torch.bfloat16).float() for k, v in W.items()}
        unchanged = [k for k in W if torch.equal(W[k], base[k])]
        if unchanged:
            raise SystemExit(f"{name}: weights not updated by fine-tuning: {unchanged}")
        save_model(os.path.join(MODELS, name), dict(cfg_dict), W, tok, tok_cfg)
        report["perplexity"][name] = {d: perplexity(cfg, W, t[1]) for d, t in tokens.items()}
        report["relative_delta"][name] = relative_delta(W, base)
        print(name, report["perplexity"][name], report["relative_delta"][name], flush=True)
    with open(os.path.join(MODELS, "training_report.json"), "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    print(json.dumps(report["perplexity"], indent=1))


if __name__ == "__main__":
    main()
