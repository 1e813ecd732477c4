#!/usr/bin/python3
"""Multiple-choice conformance: optkit's `eval tasks` on the bundled samples and the task model
tiny-arith, against the oracle's loglikelihoods and metrics (testdata/eval/choice_oracle.json,
written by tests/oracles/choice_reference.py: lm-eval's tasks reimplemented in Python, the
reference JS tokenizer, the PyTorch reference model).

    choice_conformance.py OPTKIT SOURCE_DIR

Per item: every choice's loglikelihood within 2e-3 (fp32 on both sides, different summation
orders); the same acc / acc_norm outcome wherever the oracle's decision is not a near-tie (margin
under 1e-3); mc2 within 1e-3.
"""
import json
import os
import subprocess
import sys
import tempfile

optkit, source = sys.argv[1:3]
MODEL = os.path.join(source, "testdata", "models", "tiny-arith")


def main():
    golden = json.load(open(os.path.join(source, "testdata", "eval", "choice_oracle.json")))
    with tempfile.TemporaryDirectory(prefix="optkit-choice-conformance-") as work:
        env = dict(os.environ, OPTKIT_CACHE_DIR=os.path.join(work, "cache"))
        failures, compared, decisions = [], 0, 0
        for suite, expected in golden.items():
            items_file = os.path.join(work, suite + ".jsonl")
            cmd = [optkit, "--archive", os.path.join(work, "runs.db"), "eval", "tasks", "--model", MODEL, "--suite", suite,
                   "--threads", "1", "--no-cache", "--items-out", items_file, "--format", "json"]
            if expected["limit"]:
                cmd += ["--limit", str(expected["limit"])]
            subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
            ours = [json.loads(line) for line in open(items_file)]
            if len(ours) != len(expected["items"]):
                failures.append(f"{suite}: {len(ours)} items, the oracle has {len(expected['items'])}")
                continue
            for i, (mine, theirs) in enumerate(zip(ours, expected["items"])):
                for k, (a, b) in enumerate(zip(theirs["loglikelihoods"], mine["answers"]["loglikelihoods"])):
                    compared += 1
                    if abs(a - b) > 2e-3:
                        failures.append(f"{suite} item {i} choice {k}: oracle ll {a:.5f}, optkit {b:.5f}")
                for metric, value in theirs["scores"].items():
                    if "margins" not in theirs:  # mc2: a probability mass
                        if abs(value - mine["scores"][metric]) > 1e-3:
                            failures.append(f"{suite} item {i} mc2: oracle {value:.5f}, optkit {mine['scores'][metric]:.5f}")
                        continue
                    if metric not in mine["scores"] or theirs["margins"][metric] < 1e-3:
                        continue  # not a metric of this suite, or a near-tie either answer is within the numerics of
                    decisions += 1
                    if value != mine["scores"][metric]:
                        failures.append(f"{suite} item {i} {metric}: oracle {value}, optkit {mine['scores'][metric]}")
    print(f"multiple-choice conformance: {len(golden)} suites, {compared} loglikelihoods, {decisions} acc/acc_norm "
          f"decisions compared with the PyTorch oracle; {len(failures)} differ")
    for f in failures[:20]:
        print("  " + f)
    sys.exit(1 if failures or compared == 0 else 0)


if __name__ == "__main__":
    main()
