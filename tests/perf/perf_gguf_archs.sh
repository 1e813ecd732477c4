#!/usr/bin/env bash
# GGUF export of each architecture and file type against llama-quantize, run by hand with a
# llama.cpp build outside the repository (../shared/tools/README.md), never in CI. The models:
#   - qwen2-bias and qwen3-qknorm (testdata/models/oracle, with the oracle byte-level tokenizer);
#   - random ones made here: llama and qwen2 with 80 layers (what llama.cpp types 70B, whose
#     attn_v takes more bits) and hidden 256 (whole k-quant super-blocks), a Mistral Nemo shape
#     (head_dim 48, not hidden / heads), and mixtures of experts: Mixtral with 8 experts (the count
#     llama-quantize's own rules name) and Qwen3-MoE with 6, top 2.
# For each, an F32 GGUF is written here from the folder's safetensors (numpy and gguf-py; the
# metadata copied from optkit's Q8_0 file, Q and K rows permuted for the llama architecture as
# llama.cpp's converter permutes them), llama-quantize makes each file type of it, and optkit
# compress makes the same from the folder. Printed: how many tensors are byte for byte the same (and
# the first that differ), and for Q8_0 and Q4_K_M, llama-perplexity (-c 64, -fa off) against optkit
# eval perplexity on optkit's file; for the mixtures, also Q4_K_M with optkit's importance matrix
# (--calib, --imatrix-out) against llama-quantize given that file.
#   LLAMA_CPP_BIN=<llama.cpp>/build/bin GGUF_PY=<llama.cpp>/gguf-py tests/perf/perf_gguf_archs.sh [OPTKIT]
set -euo pipefail
: "${LLAMA_CPP_BIN:?set LLAMA_CPP_BIN to the bin folder of a llama.cpp build}" "${GGUF_PY:?}"
optkit=$(realpath "${1:-build/optkit}")
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPTKIT_ARCHIVE="$work/archive.db" GGUF_PY LD_LIBRARY_PATH="$LLAMA_CPP_BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
corpus="$root/testdata/corpora/english.heldout.txt"
tokenizer="$root/testdata/models/oracle/gemma2-softcap"

# random_model DIR ARCH LAYERS HEAD_DIM [EXPERTS]: a random BF16 checkpoint (hidden 256, 8 heads, 2
# KV heads; EXPERTS of them, top 2, in each layer of a mixtral or qwen3_moe).
random_model() {
  mkdir -p "$1"
  /usr/bin/python3 - "$@" <<'PY'
import json, struct, sys
import numpy as np
out, arch, layers, head_dim = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
experts = int(sys.argv[5]) if len(sys.argv) > 5 else 0
hidden, inter, heads, kv, vocab = 256, 256, 8, 2, 257
rng = np.random.default_rng(7)
tensors = {}
def add(name, shape, scale=0.05, around_one=False):
    a = rng.normal(0, 0.02 if around_one else scale, shape).astype(np.float32) + (1 if around_one else 0)
    u = a.view(np.uint32)
    tensors[name] = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # to BF16, rounding to even
add("model.embed_tokens.weight", (vocab, hidden), 0.5)
for l in range(layers):
    p = f"model.layers.{l}."
    add(p + "input_layernorm.weight", (hidden,), around_one=True)
    add(p + "post_attention_layernorm.weight", (hidden,), around_one=True)
    for name, rows in (("q", heads * head_dim), ("k", kv * head_dim), ("v", kv * head_dim)):
        add(p + f"self_attn.{name}_proj.weight", (rows, hidden))
        if arch == "qwen2":
            add(p + f"self_attn.{name}_proj.bias", (rows,))
    add(p + "self_attn.o_proj.weight", (hidden, heads * head_dim))
    if arch == "qwen3_moe":
        add(p + "self_attn.q_norm.weight", (head_dim,), around_one=True)
        add(p + "self_attn.k_norm.weight", (head_dim,), around_one=True)
    if experts:
        moe = "block_sparse_moe" if arch == "mixtral" else "mlp"
        names = ("w1", "w3", "w2") if arch == "mixtral" else ("gate_proj", "up_proj", "down_proj")
        add(p + f"{moe}.gate.weight", (experts, hidden), 0.2)
        for e in range(experts):
            add(p + f"{moe}.experts.{e}.{names[0]}.weight", (inter, hidden))
            add(p + f"{moe}.experts.{e}.{names[1]}.weight", (inter, hidden))
            add(p + f"{moe}.experts.{e}.{names[2]}.weight", (hidden, inter))
        continue
    add(p + "mlp.gate_proj.weight", (inter, hidden))
    add(p + "mlp.up_proj.weight", (inter, hidden))
    add(p + "mlp.down_proj.weight", (hidden, inter))
add("model.norm.weight", (hidden,), around_one=True)
add("lm_head.weight", (vocab, hidden))
header, offset = {}, 0
for name, a in tensors.items():
    header[name] = {"dtype": "BF16", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
    offset += a.nbytes
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(f"{out}/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text)
    for a in tensors.values():
        f.write(a.tobytes())
classes = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "mistral": "MistralForCausalLM",
           "mixtral": "MixtralForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM"}
config = {"architectures": [classes[arch]], "model_type": arch, "vocab_size": vocab, "hidden_size": hidden,
          "intermediate_size": inter, "num_hidden_layers": layers, "num_attention_heads": heads,
          "num_key_value_heads": kv, "head_dim": head_dim, "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
          "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False, "sliding_window": None,
          "torch_dtype": "bfloat16", "bos_token_id": 256}
if experts:
    config.update({"num_local_experts" if arch == "mixtral" else "num_experts": experts, "num_experts_per_tok": 2})
    if arch == "qwen3_moe":
        config.update({"moe_intermediate_size": inter, "norm_topk_prob": True})
json.dump(config, open(f"{out}/config.json", "w"), indent=1)
PY
}

# f32_gguf FOLDER META.gguf OUT.gguf: the folder's tensors in F32 under META's metadata.
f32_gguf() {
  /usr/bin/python3 - "$@" <<'PY'
import json, os, struct, sys
import numpy as np
sys.path.insert(0, os.environ["GGUF_PY"])
import gguf
folder, meta_path, out = sys.argv[1:4]
raw = open(f"{folder}/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
config = json.load(open(f"{folder}/config.json"))
def tensor(name):
    h = header[name]
    b = raw[8 + n + h["data_offsets"][0]:8 + n + h["data_offsets"][1]]
    if h["dtype"] == "BF16":
        a = (np.frombuffer(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
    else:
        a = np.frombuffer(b, dtype={"F32": np.float32, "F16": np.float16}[h["dtype"]]).astype(np.float32)
    return a.reshape(h["shape"])
meta = gguf.GGUFReader(meta_path)
field = meta.fields["general.architecture"]
arch = bytes(field.parts[field.data[0]]).decode()
writer = gguf.GGUFWriter(out, arch)
for f in meta.fields.values():
    kind = f.types[0] if f.types else None
    if f.name.startswith("GGUF.") or f.name == "general.architecture":
        continue
    if f.name == "general.file_type":
        writer.add_uint32(f.name, 0)  # all F32
    elif kind == gguf.GGUFValueType.ARRAY:
        if len(f.types) > 1 and f.data:  # an empty array (merges of a vocabulary without any) is left out
            strings = f.types[1] == gguf.GGUFValueType.STRING
            writer.add_array(f.name, [bytes(f.parts[i]).decode() if strings else f.parts[i].tolist()[0] for i in f.data])
    elif kind == gguf.GGUFValueType.STRING:
        writer.add_string(f.name, bytes(f.parts[f.data[0]]).decode())
    else:
        writer.add_key_value(f.name, f.parts[f.data[0]].tolist()[0], kind)
whole = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
layer = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
         "attn_v": "self_attn.v_proj", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
         "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj",
         "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
mixtral = config["architectures"][0] == "MixtralForCausalLM"
moe = "block_sparse_moe" if mixtral else "mlp"
stacked = dict(zip(("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"),
                   ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")))
experts = config.get("num_local_experts", config.get("num_experts", 0))
for t in meta.tensors:
    parts = t.name.split(".")
    if parts[0] == "rope_freqs":
        continue
    if parts[0] == "blk" and parts[2] in stacked:  # each expert's matrix at its index, as the converter stacks them
        writer.add_tensor(t.name, np.ascontiguousarray(np.stack(
            [tensor(f"model.layers.{parts[1]}.{moe}.experts.{e}.{stacked[parts[2]]}.weight") for e in range(experts)])))
        continue
    if parts[0] == "blk" and parts[2] == "ffn_gate_inp":
        writer.add_tensor(t.name, np.ascontiguousarray(tensor(f"model.layers.{parts[1]}.{moe}.gate.weight")))
        continue
    hf = f"model.layers.{parts[1]}.{layer[parts[2]]}.{parts[3]}" if parts[0] == "blk" else f"{whole[parts[0]]}.{parts[1]}"
    a = tensor(hf)
    if arch == "llama" and parts[0] == "blk" and parts[2] in ("attn_q", "attn_k") and parts[3] == "weight":
        heads = config["num_attention_heads"] if parts[2] == "attn_q" else config.get("num_key_value_heads")
        a = a.reshape(heads, 2, a.shape[0] // heads // 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)
    writer.add_tensor(t.name, np.ascontiguousarray(a))
writer.write_header_to_file()
writer.write_kv_data_to_file()
writer.write_tensors_to_file()
writer.close()
PY
}

# same_tensors A.gguf B.gguf: "N/M" tensors with the same type and bytes, and the first that differ.
same_tensors() {
  /usr/bin/python3 - "$@" <<'PY'
import os, sys
sys.path.insert(0, os.environ["GGUF_PY"])
import gguf
a, b = ({t.name: t for t in gguf.GGUFReader(p).tensors} for p in sys.argv[1:3])
differ = [n for n, t in a.items() if n not in b or t.tensor_type != b[n].tensor_type or
          t.data.tobytes() != b[n].data.tobytes()]
print(f"{len(a) - len(differ)}/{len(a)}" + (f" (differ: {', '.join(differ[:3])})" if differ else ""))
PY
}

llama_ppl() { # GGUF (llama.cpp's asynchronous log sometimes loses its last line: up to three tries)
  local value=""
  for _ in 1 2 3; do
    "$LLAMA_CPP_BIN/llama-perplexity" -m "$1" -f "$corpus" -c 64 --chunks 16 -fa off -t 2 >"$work/ppl.log" 2>&1
    value=$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' "$work/ppl.log" | head -1)
    [ -n "$value" ] && break
  done
  echo "$value"
}

optkit_ppl() {
  "$optkit" --quiet eval perplexity --model "$1" --data "$corpus" --ctx 64 --max-windows 16 --format json 2>/dev/null |
    python3 -c 'import json,sys; print("%.4f" % json.load(sys.stdin)["perplexity"])'
}

for oracle in qwen2-bias qwen3-qknorm; do
  mkdir "$work/$oracle"
  cp "$root/testdata/models/oracle/$oracle/"{config.json,model.safetensors} "$work/$oracle/"
done
random_model "$work/llama-80" llama 80 32
random_model "$work/qwen2-80" qwen2 80 32
random_model "$work/nemo-shape" mistral 4 48
random_model "$work/mixtral-8" mixtral 4 32 8
random_model "$work/qwen3moe-6" qwen3_moe 4 32 6
printf '%-14s %-7s %-26s %12s %12s %8s\n' model type 'tensors as llama-quantize' llama-ppl optkit-ppl 'diff %'
for model in qwen2-bias qwen3-qknorm llama-80 qwen2-80 nemo-shape mixtral-8 qwen3moe-6; do
  dir="$work/$model"
  cp "$tokenizer/"{tokenizer.json,tokenizer_config.json} "$dir/"
  "$optkit" --quiet compress --model "$dir" --recipe q8_0 -o "$dir-q8_0.gguf" >/dev/null
  f32_gguf "$dir" "$dir-q8_0.gguf" "$dir-f32.gguf"
  for recipe in q4_k_m q4_k_s q5_k_m q5_k_s q6_k q8_0; do
    [ -f "$dir-$recipe.gguf" ] || "$optkit" --quiet compress --model "$dir" --recipe "$recipe" -o "$dir-$recipe.gguf" >/dev/null
    "$LLAMA_CPP_BIN/llama-quantize" "$dir-f32.gguf" "$dir-llama-$recipe.gguf" "${recipe^^}" 2 >/dev/null 2>&1
    same=$(same_tensors "$dir-$recipe.gguf" "$dir-llama-$recipe.gguf")
    l="" o="" d=""
    if [ "$recipe" = q8_0 ] || [ "$recipe" = q4_k_m ]; then
      l=$(llama_ppl "$dir-$recipe.gguf")
      o=$(optkit_ppl "$dir-$recipe.gguf")
      d=$(python3 -c "print('%.3f' % (100 * abs($o / $l - 1)))")
    fi
    printf '%-14s %-7s %-26s %12s %12s %8s\n' "$model" "$recipe" "$same" "$l" "$o" "$d"
  done
  case "$model" in mixtral-8 | qwen3moe-6) ;; *) continue ;; esac
  "$optkit" --quiet compress --model "$dir" --recipe q4_k_m --calib "$root/testdata/corpora/english.calib.txt" \
    --seq-len 128 --imatrix-out "$dir.imatrix.gguf" -o "$dir-q4_k_m-im.gguf" >/dev/null
  "$LLAMA_CPP_BIN/llama-quantize" --imatrix "$dir.imatrix.gguf" "$dir-f32.gguf" "$dir-llama-q4_k_m-im.gguf" Q4_K_M 2 \
    >/dev/null 2>&1
  printf '%-14s %-7s %-26s\n' "$model" 'q4km+im' "$(same_tensors "$dir-q4_k_m-im.gguf" "$dir-llama-q4_k_m-im.gguf")"
done
