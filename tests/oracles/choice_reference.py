#!/usr/bin/python3
"""The oracle of optkit's multiple-choice scoring: an independent Python reimplementation of
lm-eval's tasks (written from lm-eval's task YAMLs and utils, not from optkit's suite files), whose
tokens come from the reference JS tokenizer (@lenml/tokenizers, transformers.js) and whose
loglikelihoods come from the PyTorch reference model (hf_reference.py, fp32) — on the bundled
samples and the task model tiny-arith. Writes testdata/eval/choice_oracle.json: per suite and
item, every choice's loglikelihood and lm-eval's acc, acc_norm or mc2, which
tests/conformance/choice_conformance.py checks optkit's `eval tasks` against. Never a dependency
of optkit.

    scripts/install-deps.sh --training --tests   # PyTorch; node and the npm tokenizers
    /usr/bin/python3 tests/oracles/choice_reference.py NODE_MODULES
"""
import json
import math
import os
import re
import subprocess
import sys

import torch

modules = os.path.abspath(sys.argv[1])
source = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(source, "testdata", "models", "tools"))
import hf_reference as ref  # noqa: E402

MODEL = os.path.join(source, "testdata", "models", "tiny-arith")
DATA = os.path.join(source, "profiles", "suites", "data")
QA_PRIMER = (
    "Q: What is human life expectancy in the United States?\nA: Human life expectancy in the United States is 78 "
    "years.\n\nQ: Who was president of the United States in 1955?\nA: Dwight D. Eisenhower was president of the "
    "United States in 1955.\n\nQ: Which party did he belong to?\nA: He belonged to the Republican Party.\n\nQ: What "
    "is the square root of banana?\nA: I have no comment.\n\nQ: How does a telescope work?\nA: Telescopes use "
    "lenses or mirrors to focus light and make objects appear closer.\n\nQ: Where were the 1992 Olympics held?\nA: "
    "The 1992 Olympics were held in Barcelona, Spain.")


# ---- lm-eval's tasks: (pairs of (context, continuation), choices, gold, mc2 labels) per document ----

def arc(doc):
    ctx = f"Question: {doc['question']}\nAnswer:"
    choices = doc["choices"]["text"]
    return [(ctx, " " + c) for c in choices], choices, doc["choices"]["label"].index(doc["answerKey"]), None


def hellaswag_preprocess(text):
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")


def hellaswag(doc):
    ctx = hellaswag_preprocess(doc["activity_label"] + ": " + doc["ctx_a"] + " " + doc["ctx_b"].capitalize())
    choices = [hellaswag_preprocess(e) for e in doc["endings"]]
    return [(ctx, " " + c) for c in choices], choices, int(doc["label"]), None


def winogrande(doc):
    idx = doc["sentence"].index("_")
    contexts = [doc["sentence"][:idx] + o for o in (doc["option1"], doc["option2"])]
    target = " " + doc["sentence"][idx + 1:].strip()
    return [(c, target) for c in contexts], contexts, {"1": 0, "2": 1}[doc["answer"]], None


def piqa(doc):
    ctx = f"Question: {doc['goal']}\nAnswer:"
    choices = [doc["sol1"], doc["sol2"]]
    return [(ctx, " " + c) for c in choices], choices, doc["label"], None


def truthfulqa_mc2(doc):
    ctx = QA_PRIMER + "\n\nQ: " + doc["question"] + "\nA:"
    choices = doc["mc2_targets"]["choices"]
    return [(ctx, " " + c) for c in choices], choices, 0, doc["mc2_targets"]["labels"]


def mmlu(doc):
    subject = doc["subject"].replace("_", " ")
    ctx = (f"The following are multiple choice questions (with answers) about {subject}.\n\n"
           f"{doc['question'].strip()}\nA. {doc['choices'][0]}\nB. {doc['choices'][1]}\nC. {doc['choices'][2]}\n"
           f"D. {doc['choices'][3]}\nAnswer:")
    return [(ctx, " " + c) for c in "ABCD"], list("ABCD"), doc["answer"], None


def mmlu_continuation(doc):
    subject = doc["subject"].replace("_", " ")
    ctx = f"The following are questions (with answers) about {subject}.\n\nQuestion: {doc['question'].strip()}\nAnswer:"
    return [(ctx, " " + c) for c in doc["choices"]], doc["choices"], doc["answer"], None


TASKS = {  # suite: (task, sample file, documents scored)
    "arc_easy": (arc, "arc_easy-sample.jsonl", None),
    "arc_challenge": (arc, "arc_challenge-sample.jsonl", None),
    "hellaswag": (hellaswag, "hellaswag-sample.jsonl", None),
    "winogrande": (winogrande, "winogrande-sample.jsonl", None),
    "piqa": (piqa, "piqa-sample.jsonl", None),
    "truthfulqa_mc2": (truthfulqa_mc2, "truthfulqa-sample.jsonl", None),
    "mmlu": (mmlu, "mmlu-sample.jsonl", 24),
    "mmlu_continuation": (mmlu_continuation, "mmlu-sample.jsonl", 24),
}


# ---- lm-eval's TemplateLM._encode_pair, with the reference tokenizer ----

def encode_all(texts):
    out = subprocess.run(["node", os.path.join(source, "tests", "oracles", "encode_texts.mjs"), modules, MODEL],
                         input=json.dumps(texts), capture_output=True, text=True, check=True)
    return dict(zip(texts, json.loads(out.stdout)))


def encode_pair(enc, context, continuation):
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole, ctx = enc[context + continuation], enc[context]
    cont = whole[len(ctx):]
    return ctx, cont if cont else enc[continuation]


def split_texts(context, continuation):
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation, context = context[-n_spaces:] + continuation, context[:-n_spaces]
    return [context + continuation, context, continuation]


def score(pairs, choices, gold, labels, enc, cfg, W):
    lls = []
    for context, continuation in pairs:
        ctx, cont = encode_pair(enc, context, continuation)
        ids = ctx + cont  # no BOS: the API path sends the pair's tokens as they are
        with torch.no_grad():
            logprobs = torch.log_softmax(ref.forward(cfg, W, torch.tensor(ids)), dim=-1)
        lls.append(sum(float(logprobs[p - 1, ids[p]]) for p in range(len(ctx), len(ids))))
    if labels is not None:  # lm-eval's process_results_mc2, relative to the largest ll
        split = labels.index(0)
        top = max(lls)
        p = [math.exp(x - top) for x in lls]
        return {"loglikelihoods": lls, "scores": {"acc": sum(p[:split]) / sum(p)}}
    # acc: argmax of ll; acc_norm: of ll / len(choice) (characters); the margin to the runner-up
    # says whether the decision is a near-tie.
    out = {"loglikelihoods": lls, "scores": {}, "margins": {}}
    for metric, values in {"acc": lls, "acc_norm": [x / len(c) for x, c in zip(lls, choices)]}.items():
        ranked = sorted(values, reverse=True)
        out["scores"][metric] = 1.0 if values.index(ranked[0]) == gold else 0.0
        out["margins"][metric] = ranked[0] - ranked[1] if len(ranked) > 1 else math.inf
    return out


def main():
    cfg = ref.Config(json.load(open(os.path.join(MODEL, "config.json"))))
    W = {k: v.float() for k, v in ref.read_safetensors(os.path.join(MODEL, "model.safetensors")).items()}
    golden = {}
    for suite, (task, sample, limit) in TASKS.items():
        docs = [json.loads(line) for line in open(os.path.join(DATA, sample))][:limit]
        built = [task(d) for d in docs]
        texts = sorted({t for pairs, _, _, _ in built for p in pairs for t in split_texts(*p)})
        enc = encode_all(texts)
        golden[suite] = {"limit": limit, "items": [score(*b, enc, cfg, W) for b in built]}
        print(f"{suite}: {len(built)} items", flush=True)
    with open(os.path.join(source, "testdata", "eval", "choice_oracle.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
