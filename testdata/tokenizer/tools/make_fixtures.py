#!/usr/bin/python3
"""Writes the fixture tokenizers under testdata/tokenizer/fixtures/: small tokenizer.json files that
exercise the components the npm-shipped tokenizers do not (WordPiece with the BERT normalizer and
pre-tokenizer, Unigram with Metaspace, BPE with a continuing-subword prefix and
an end-of-word suffix behind a Sequence of normalizers and pre-tokenizers). The conformance test
checks optkit against transformers.js on them. Vocabularies are learned from testdata/corpora so
ordinary text mostly hits real pieces. Run from the repository root; the output is committed."""
import collections
import json
import math
import os
import re
import unicodedata

ROOT = "testdata/tokenizer/fixtures"


def corpus_words():
    words = collections.Counter()
    for name in sorted(os.listdir("testdata/corpora")):
        if name.endswith(".calib.txt"):
            text = open(os.path.join("testdata/corpora", name), encoding="utf-8").read()
            words.update(re.findall(r"\w+|[^\w\s]", text.lower()))
    return words


def write(name, tokenizer, config):
    folder = os.path.join(ROOT, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False, indent=1)
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)


def strip_accents(word):
    return "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn")


def bert_wordpiece(words):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = sorted({c for w in words for c in strip_accents(w)})
    vocab += chars + ["##" + c for c in chars]
    common = [w for w, _ in words.most_common(600) if len(w) > 1]
    vocab += [strip_accents(w) for w in common]
    suffixes = collections.Counter()
    for w in words:
        for k in (2, 3, 4):
            if len(w) > k + 1:
                suffixes["##" + strip_accents(w[-k:])] += words[w]
    vocab += [s for s, _ in suffixes.most_common(300)]
    vocab = list(dict.fromkeys(vocab))
    ids = {t: i for i, t in enumerate(vocab)}
    write("bert-wordpiece", {
        "version": "1.0",
        "added_tokens": [{"id": ids[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for t in vocab[:5]],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", ids["[SEP]"]], "cls": ["[CLS]", ids["[CLS]"]]},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": ids},
    }, {"tokenizer_class": "BertTokenizer", "clean_up_tokenization_spaces": True, "do_lower_case": True})


def unigram_metaspace(words):
    pieces = collections.Counter()
    for w, n in words.items():
        w = "\u2581" + w
        for i in range(len(w)):
            for j in range(i + 1, min(len(w), i + 8) + 1):
                pieces[w[i:j]] += n
    total = sum(pieces.values())
    chosen = [p for p, _ in pieces.most_common(1500)]
    vocab = [["<unk>", 0.0], ["<s>", 0.0], ["</s>", 0.0]]
    vocab += [[p, math.log(pieces[p] / total)] for p in chosen]
    # Every character of the corpora and the conformance cases, so nothing is unknown: for unknown
    # characters transformers.js's lattice differs from Hugging Face's (unit tests cover them).
    text = "".join(open(os.path.join("testdata/corpora", n), encoding="utf-8").read()
                   for n in sorted(os.listdir("testdata/corpora")))
    text += "".join(json.load(open("testdata/tokenizer/conformance_cases.json", encoding="utf-8")))
    rare = math.log(1 / total) - 5
    vocab += [[c, rare] for c in sorted(set(unicodedata.normalize("NFKC", text).replace(" ", "\u2581")))
              if c not in pieces or pieces[c] == 0 and c not in chosen]
    seen = set()
    vocab = [v for v in vocab if not (v[0] in seen or seen.add(v[0]))]
    write("unigram-metaspace", {
        "version": "1.0",
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, t in enumerate(["<unk>", "<s>", "</s>"])],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFKC"},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
        # add_prefix_space beside prepend_scheme: transformers.js reads only the former
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True,
                          "add_prefix_space": True},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}},
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True,
                    "add_prefix_space": True},
        # transformers.js's Unigram has no byte fallback: the fixture leaves it off (unit tests cover it)
        "model": {"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": False},
    }, {"tokenizer_class": "T5Tokenizer", "clean_up_tokenization_spaces": False})


def bpe_suffix(words):
    # A tiny BPE trained on the corpus words, CLIP-style: "</w>" ends a word.
    corpus = {tuple(w[:-1]) + (w[-1] + "</w>",): n for w, n in words.items() if w.isalpha()}
    symbols = sorted({s for w in corpus for s in w} | {c for w in words for c in w} |
                     {c + "</w>" for w in words for c in w})
    merges = []
    for _ in range(400):
        pairs = collections.Counter()
        for w, n in corpus.items():
            for a, b in zip(w, w[1:]):
                pairs[a, b] += n
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append(f"{a} {b}")
        symbols.append(a + b)
        merged = {}
        for w, n in corpus.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] = n
        corpus = merged
    vocab = {"<|endoftext|>": 0, "<unk>": 1}
    for s in symbols:
        vocab.setdefault(s, len(vocab))
    write("bpe-suffix", {
        "version": "1.0",
        "added_tokens": [{"id": 0, "content": "<|endoftext|>", "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": True,
                                                                              "strip_right": True}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            # transformers.js runs Punctuation as Contiguous whatever the behavior, and Digits on ASCII
            # digits only: the fixture stays where it agrees with Hugging Face (unit tests cover the rest)
            {"type": "WhitespaceSplit"}, {"type": "Punctuation", "behavior": "Contiguous"}]},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [0],
                                                                "tokens": ["<|endoftext|>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "</w>"}, "content": " "}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 0, "stop": 1}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": "</w>", "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                  "merges": merges},
    }, {"tokenizer_class": "CLIPTokenizer", "clean_up_tokenization_spaces": False})


def main():
    words = corpus_words()
    bert_wordpiece(words)
    unigram_metaspace(words)
    bpe_suffix(words)


if __name__ == "__main__":
    main()
