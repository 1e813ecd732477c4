#!/usr/bin/env bash
# optkit's GGUF export against llama.cpp itself (node-llama-cpp's prebuilt binaries): tiny-base
# (llama) written as Q4_K_M with an importance matrix (testdata/golden/tiny-base.imatrix.gguf),
# Q4_K_S, Q5_K_M, Q5_K_S, Q6_K and Q8_0, and the random-weight oracle models qwen2-bias (qwen2: q/k/v biases) and
# qwen3-qknorm (qwen3: per-head q/k norms, head_dim 24) in the four types without one, and
# mixtral-moe (llama with stacked experts) in three, must load in
# llama.cpp as their architecture with the tensor types and bytes llama-quantize gives the same
# model (with the same matrix), tokenize as optkit does, and score and continue text as optkit's
# runtime does on the same file. (tests/cli/test_cli_gguf.sh covers --calib.)
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

# check MODEL_DIR GOLDEN RECIPE [FLAGS...]: MODEL_DIR as RECIPE, in optkit and in llama.cpp.
check() {
  local model=$1 golden=$2 recipe=$3 out
  out="$work/$(basename "$model")-$recipe"
  "$optkit" --quiet compress --model "$model" --recipe "$recipe" "${@:4}" -o "$out.gguf" >/dev/null
  "$greedy" "$out.gguf" "$work/prompts.jsonl" 16 >"$out.optkit.jsonl"
  node "$(dirname "$0")/gguf_llama_cpp.mjs" "$modules" "$out.gguf" "$out.optkit.jsonl" "$golden"
}

check "$model" "$testdata/golden/gguf_llama_quantize.json" q4_k_m --imatrix "$testdata/golden/tiny-base.imatrix.gguf"
for recipe in q4_k_s q5_k_m q5_k_s q6_k q8_0; do
  check "$model" "$testdata/golden/gguf_llama_quantize.json" "$recipe"
done
# The Qwen oracles with the oracle models' byte-level tokenizer (256 bytes and <bos>).
for oracle in qwen2-bias qwen3-qknorm; do
  mkdir "$work/$oracle"
  cp "$testdata/models/oracle/$oracle/"{config.json,model.safetensors} "$work/$oracle/"
  cp "$testdata/models/oracle/gemma2-softcap/"{tokenizer.json,tokenizer_config.json} "$work/$oracle/"
  for recipe in q4_k_m q5_k_m q6_k q8_0; do
    check "$work/$oracle" "$testdata/golden/gguf_llama_quantize.$oracle.json" "$recipe"
  done
done
# Mixtral (llama with 6 stacked experts) with its own byte-level tokenizer, its router weights ×16
# (exactly: BF16 exponents + 4). The oracle's random router is nearly flat, so any two
# implementations' rounding picks other experts for a few tokens; a trained router's logits are
# spread like these. No Q8_0 golden: llama-quantize refuses the 48-value ffn_down rows there.
mkdir "$work/mixtral-moe"
cp "$testdata/models/oracle/mixtral-moe/"{config.json,tokenizer.json,tokenizer_config.json} "$work/mixtral-moe/"
python3 - "$testdata/models/oracle/mixtral-moe/model.safetensors" "$work/mixtral-moe/model.safetensors" <<'PY'
import array, json, struct, sys
raw = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
for name, t in json.loads(raw[8:8 + n]).items():
    if name.endswith("block_sparse_moe.gate.weight"):
        assert t["dtype"] == "BF16"
        a, b = (8 + n + o for o in t["data_offsets"])
        v = array.array("H", raw[a:b])
        for i, x in enumerate(v):
            if 0 < (x >> 7) & 0xFF < 0xFB:
                v[i] = x + (4 << 7)
        raw[a:b] = v.tobytes()
open(sys.argv[2], "wb").write(raw)
PY
for recipe in q4_k_m q5_k_m q6_k; do
  check "$work/mixtral-moe" "$testdata/golden/gguf_llama_quantize.mixtral-moe.json" "$recipe"
done
