#!/usr/bin/env bash
# optkit's GGUF export against llama.cpp itself (node-llama-cpp's prebuilt binaries): tiny-base
# written as Q4_K_M with an importance matrix (testdata/golden/tiny-base.imatrix.gguf), Q5_K_M,
# Q6_K and Q8_0 must load in llama.cpp with the tensor types and bytes llama-quantize gives the
# same model (with the same matrix), tokenize as optkit does, and score and continue text as
# optkit's runtime does on the same file. (tests/cli/test_cli_gguf.sh covers --calib.)
#   gguf_llama_cpp.sh OPTKIT GGUF_GREEDY NODE_MODULES_DIR TESTDATA_DIR
set -euo pipefail
optkit=$1 greedy=$2 modules=$3 testdata=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPTKIT_HOME="$work/home"
model="$testdata/models/tiny-base"

# Prompts: held-out prose and code, one JSON string per line.
python3 - "$testdata/corpora" >"$work/prompts.jsonl" <<'PY'
import json, sys
root = sys.argv[1]
for name, take in (("english.heldout.txt", 3), ("code.heldout.txt", 2)):
    paragraphs = [p.strip() for p in open(f"{root}/{name}", encoding="utf-8").read().split("\n\n") if p.strip()]
    for p in paragraphs[:take]:
        print(json.dumps(p[:400]))
print(json.dumps("Unicode: naïve café — “quotes”, 数字 123456 and tabs\tend."))
PY

for recipe in q4_k_m q5_k_m q6_k q8_0; do
  calib=()
  [ "$recipe" = q4_k_m ] && calib=(--imatrix "$testdata/golden/tiny-base.imatrix.gguf")
  "$optkit" --quiet compress --model "$model" --recipe "$recipe" "${calib[@]}" -o "$work/$recipe.gguf" >/dev/null
  "$greedy" "$work/$recipe.gguf" "$work/prompts.jsonl" 16 >"$work/$recipe.optkit.jsonl"
  node "$(dirname "$0")/gguf_llama_cpp.mjs" "$modules" "$work/$recipe.gguf" "$work/$recipe.optkit.jsonl" \
    "$testdata/golden/gguf_llama_quantize.json"
done
