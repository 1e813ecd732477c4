#!/usr/bin/python3
"""Trains tiny-arith: tiny-base fine-tuned on generated arithmetic word problems written in GSM8K's
answer format (a worked solution, then "#### N"), so that `optkit eval tasks` has a model that can
do a task: it scores well above zero on the bundled `arith` suite, int8 keeps it, int2 breaks it.

    scripts/install-deps.sh --training
    /usr/bin/python3 testdata/models/tools/train_task_model.py

Writes testdata/models/tiny-arith/ and profiles/suites/data/arith-{test,fewshot}.jsonl. Seeded; the
test problems are drawn apart from the training ones (no question text in both).
"""
import argparse
import json
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as ref  # noqa: E402
import train_tiny_models as tiny  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SUITE_DATA = os.path.join(ROOT, "profiles", "suites", "data")
NAMES = ["Ann", "Ben", "Cara", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivan", "Jo", "Kim", "Leo", "Mia", "Ned",
         "Omar", "Pia", "Raj", "Sam", "Tia", "Uma"]
ITEMS = ["apples", "books", "coins", "pens", "cards", "shells", "stamps", "marbles", "cups", "eggs", "keys", "rocks"]


def problem(rng):
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    kind = rng.choice(["add", "sub", "two"])
    a, b = rng.randint(2, 20), rng.randint(1, 9)
    if kind == "add":
        q = f"{name} has {a} {item}. {name} gets {b} more. How many {item} does {name} have now?"
        n = a + b
        sol = f"{name} has {a} + {b} = {n} {item}."
    elif kind == "sub":
        a = max(a, b + 1)
        q = f"{name} has {a} {item} and gives away {b}. How many {item} are left?"
        n = a - b
        sol = f"{name} has {a} - {b} = {n} {item} left."
    else:
        c = rng.randint(1, 9)
        s = a + b
        c = min(c, s - 1)
        q = f"{name} has {a} {item}, gets {b} more and then gives away {c}. How many {item} are left?"
        n = s - c
        sol = f"{name} has {a} + {b} = {s} {item}. Then {s} - {c} = {n} {item} are left."
    return {"question": q, "answer": f"{sol}\n#### {n}"}


def example_text(p):
    return f"Question: {p['question']}\nAnswer: {p['answer']}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--test-items", type=int, default=200)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    rng = random.Random(20261123)
    test, seen = [], set()
    while len(test) < args.test_items:
        p = problem(rng)
        if p["question"] not in seen:
            seen.add(p["question"])
            test.append(p)
    fewshot = []
    while len(fewshot) < 8:
        p = problem(rng)
        if p["question"] not in seen:
            seen.add(p["question"])
            fewshot.append(p)
    train = []
    while len(train) < 20000:
        p = problem(rng)
        if p["question"] not in seen:
            train.append(p)
    os.makedirs(SUITE_DATA, exist_ok=True)
    for name, rows in [("arith-test.jsonl", test), ("arith-fewshot.jsonl", fewshot)]:
        with open(os.path.join(SUITE_DATA, name), "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")

    base_dir = os.path.join(tiny.MODELS, "tiny-base")
    with open(os.path.join(base_dir, "config.json")) as f:
        cfg_dict = json.load(f)
    with open(os.path.join(base_dir, "tokenizer.json")) as f:
        tok = json.load(f)
    with open(os.path.join(base_dir, "tokenizer_config.json")) as f:
        tok_cfg = json.load(f)
    cfg = ref.Config(cfg_dict)
    W = {k: v.float() for k, v in ref.read_safetensors(os.path.join(base_dir, "model.safetensors")).items()}
    vocab, merges = tiny.committed_tokenizer()
    bos = cfg_dict["bos_token_id"]
    encoded = [tiny.encode(example_text(p), vocab, merges) for p in train]
    sep = tiny.encode("\n\n", vocab, merges)
    seq, batch = 128, 16
    gen = torch.Generator().manual_seed(7)

    def batches():
        while True:
            rows = []
            for _ in range(batch):
                ids = [bos]
                while len(ids) < seq + 1:
                    ids += encoded[int(torch.randint(0, len(encoded), (1,), generator=gen))] + sep
                rows.append(torch.tensor(ids[: seq + 1]))
            chunk = torch.stack(rows)
            yield chunk[:, :-1], chunk[:, 1:]

    W = tiny.train(cfg, W, None, None, args.steps, args.lr, 0, "arith", stream=batches())
    W = {k: v.to(torch.bfloat16).float() for k, v in W.items()}
    tiny.save_model(os.path.join(tiny.MODELS, "tiny-arith"), cfg_dict, W, tok, tok_cfg)

    # Greedy accuracy on the test problems with the reference forward pass (the figure optkit's
    # own run of the bundled suite should land near).
    correct = 0
    inv = {v: k for k, v in vocab.items()}
    checked = test[:50]
    for p in checked:
        ids = [bos] + tiny.encode(f"Question: {p['question']}\nAnswer:", vocab, merges)
        out = []
        with torch.no_grad():
            for _ in range(48):
                logits = ref.forward(cfg, W, torch.tensor([ids + out]))[0, -1]
                out.append(int(logits.argmax()))
                text = "".join(inv.get(t, "") for t in out)
                if "\u010a\u010a" in text or "Question" in text:
                    break
        correct += ("#### " + p["answer"].split("#### ")[1]) in text.replace("\u0120", " ").replace("\u010a", "\n")
    print(f"reference greedy accuracy on {len(checked)} test problems: {correct / len(checked):.2f}", flush=True)


if __name__ == "__main__":
    main()
