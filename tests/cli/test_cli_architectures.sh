# The later architectures end to end on their random-weight oracle models (testdata/models/oracle,
# PyTorch-checked logits, byte-level tokenizers): doctor names the architecture and its features,
# eval perplexity runs, every weight recipe compresses them close to the original (KL measured by
# eval against the uncompressed model, which catches a SmoothQuant fold into Gemma's (1 + w) norms
# that forgets the 1), a delta of a fine-tuned copy (its own norms) reconstructs that copy when
# merged, and serve-deltas serves the base and the delta; the mixtures of experts evaluate, compress
# per expert (checked by an independent reader) and serve; Phi-3 (fused q/k/v and gate/up, partial
# rotary, LongRoPE) evaluates, compresses its fused modules whole (checked by the same reader) and
# serves.
. "$(dirname "$0")/lib.sh"

models="$OPTKIT_SOURCE_DIR/testdata/models/oracle"
calib="$OPTKIT_SOURCE_DIR/testdata/corpora/english.heldout.txt"
server=""
trap '[ -n "$server" ] && kill -KILL "$server" 2>/dev/null; rm -rf "$SCRATCH"' EXIT

# kl_of MODEL BASE: "KL_MEAN TOP1" of MODEL against BASE over 8 windows of 64 tokens.
kl_of() {
  run eval perplexity --model "$1" --kl-base "$2" --data "$calib" --ctx 64 --max-windows 8 --format json "${@:3}"
  expect_rc 0
  python3 -c 'import json,sys; d=json.loads(sys.argv[1])["kl"]; print(d["kl_mean"], d["top1_agreement"])' "$OUT"
}

# complete MODEL: "STATUS COMPLETION_TOKENS" of a 6-token greedy completion from the server on $port.
complete() {
  python3 - "$port" "$1" <<'PY'
import http.client, json, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=60)
body = {"model": sys.argv[2], "prompt": "The cat", "max_tokens": 6, "temperature": 0, "ignore_eos": True}
c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
r = c.getresponse()
print(r.status, json.loads(r.read())["usage"]["completion_tokens"])
PY
}

# below VALUE LIMIT: VALUE < LIMIT as numbers.
below() {
  python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)' "$1" "$2"
}

# compress_within MODEL RECIPE:LIMIT...: each recipe compresses MODEL to within LIMIT of KL from it
# (into $SCRATCH/MODEL-RECIPE), and GPTQ's calibration (int_w4a16) beats rounding to nearest
# (w4a16_rtn) at the same bits.
compress_within() {
  local model=$1 recipe_limit recipe kl gptq rtn
  shift
  for recipe_limit in "$@"; do
    recipe=${recipe_limit%%:*}
    run -q compress --model "$models/$model" --recipe "$recipe" --calib "$calib" --samples 8 --seq-len 64 \
      -o "$SCRATCH/$model-$recipe"
    expect_rc 0
    read -r kl _ <<<"$(kl_of "$SCRATCH/$model-$recipe" "$models/$model")"
    below "$kl" "${recipe_limit#*:}" || fail "$model $recipe: KL $kl to the original is over ${recipe_limit#*:}"
  done
  read -r gptq _ <<<"$(kl_of "$SCRATCH/$model-int_w4a16" "$models/$model")"
  read -r rtn _ <<<"$(kl_of "$SCRATCH/$model-w4a16_rtn" "$models/$model")"
  below "$gptq" "$rtn" || fail "$model: GPTQ's KL $gptq is not below round-to-nearest's $rtn"
}

# unpack_int4 MODEL RECIPE [LIMIT]: an independent reader of compressed-tensors unpacks every
# expert's int4 weights (the shared one's too) and every fused module's (Phi-3's qkv_proj and
# gate_up_proj) from $SCRATCH/MODEL-RECIPE: the routers and shared experts' gates are byte for byte
# the source's, and
# each weight is within half a step of the source's (no LIMIT: round to nearest; with BF16 scales a
# step rounded up to 8/256 more at the clamp), or all within LIMIT of their norm.
unpack_int4() {
  python3 - "$models/$1" "$SCRATCH/$1-$2" "${@:3}" <<'PY'
import array, json, struct, sys

def reader(path):
    data = open(path + "/model.safetensors", "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    def get(name):
        info = header[name]
        raw = data[8 + n + info["data_offsets"][0]:8 + n + info["data_offsets"][1]]
        kind = info["dtype"]
        if kind == "BF16":
            values = [struct.unpack("<f", struct.pack("<I", w << 16))[0] for w in array.array("H", raw)]
        else:
            values = list(array.array({"F32": "f", "I32": "i", "I64": "q"}[kind], raw))
        return values, info["shape"], raw, kind
    return header, get

source_header, source = reader(sys.argv[1])
out_header, out = reader(sys.argv[2])
relative_limit = float(sys.argv[3]) if len(sys.argv) > 3 else None
gates = (".mlp.gate.weight", ".block_sparse_moe.gate.weight", ".shared_expert_gate.weight")
routers = [k for k in source_header if k.endswith(gates)]
assert all(out(r)[2] == source(r)[2] for r in routers), "a router changed"
experts = sorted(k[:-len(".weight")] for k in source_header
                 if any(part in k for part in (".experts.", ".shared_expert.", ".qkv_proj.", ".gate_up_proj.")))
assert experts, "no expert or fused module to unpack"
assert all(".experts." not in e for e in experts) or routers, "experts without routers"

worst, scale_kind, error, norm = 0.0, None, 0.0, 0.0
for m in experts:
    w, (rows, cols), _, _ = source(m + ".weight")
    packed, (_, words), _, _ = out(m + ".weight_packed")
    scale, (_, groups), _, scale_kind = out(m + ".weight_scale")
    assert out(m + ".weight_shape")[0] == [rows, cols], m
    for r in range(rows):
        for c in range(cols):
            q = ((packed[r * words + c // 8] & 0xFFFFFFFF) >> (4 * (c % 8)) & 0xF) - 8
            s = scale[r * groups + c * groups // cols]
            worst = max(worst, abs(q * s - w[r * cols + c]) / s)
            error += (q * s - w[r * cols + c]) ** 2
            norm += w[r * cols + c] ** 2
relative = (error / norm) ** 0.5
print(f"{len(experts)} matrices: worst |w - q s| / s = {worst:.3f}, ||W - QS|| / ||W|| = {relative:.3f}")
if relative_limit is None:  # round to nearest: half a step, a BF16 scale's rounding more at the clamp
    assert worst <= 0.5 + (8 / 256 if scale_kind == "BF16" else 1e-3)
else:
    assert relative <= relative_limit
PY
}

# awq_folds MODEL FOLDER: AWQ's factors went into every linear reading a smoothed input, compressed
# or not. s is read back as the norm's source / output ratio (1/s went into the norm); the linears
# the output stores unquantized — a mixture's router (and Qwen2-MoE's shared-expert gate) behind
# the post-attention norm, and k_proj, which the test recipe leaves alone, behind the input norm —
# must be the source's times s, to the two BF16 roundings, and s must be far from 1 somewhere
# (else the check says nothing).
awq_folds() {
  python3 - "$models/$1" "$2" <<'PY'
import array, json, struct, sys

def reader(path):
    data = open(path + "/model.safetensors", "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    def get(name):
        info = header[name]
        raw = data[8 + n + info["data_offsets"][0]:8 + n + info["data_offsets"][1]]
        if info["dtype"] == "F32":
            return list(array.array("f", raw)), info["shape"]
        assert info["dtype"] == "BF16", name
        return [struct.unpack("<f", struct.pack("<I", w << 16))[0] for w in array.array("H", raw)], info["shape"]
    return header, get

source_header, source = reader(sys.argv[1])
_, out = reader(sys.argv[2])
behind = {".mlp.gate.weight": "post_attention_layernorm", ".block_sparse_moe.gate.weight": "post_attention_layernorm",
          ".shared_expert_gate.weight": "post_attention_layernorm", ".self_attn.k_proj.weight": "input_layernorm"}
checked, far = 0, 0.0
for name in sorted(source_header):
    norm = next((n for suffix, n in behind.items() if name.endswith(suffix)), None)
    if norm is None:
        continue
    norm = f"model.layers.{name.split('.')[2]}.{norm}.weight"
    s = [a / b for a, b in zip(source(norm)[0], out(norm)[0])]
    far = max(far, max(abs(v - 1) for v in s))
    w, (rows, cols) = source(name)
    folded, _ = out(name)
    for r in range(rows):
        for c in range(cols):
            want = w[r * cols + c] * s[c]
            assert abs(folded[r * cols + c] - want) <= 2 ** -7 * abs(want) + 1e-30, (name, r, c, folded[r * cols + c], want)
    checked += 1
assert checked > 0 and far > 0.05, (checked, far)
print(f"{checked} unquantized linears folded, largest |s - 1| {far:.2f}")
PY
}

run doctor --model "$models/gemma2-softcap"
expect_out_has "Gemma2ForCausalLM: 3 layers"
expect_out_has "sliding window 5 on 2 of 3 layers"
expect_out_has "attention soft-cap 1, final soft-cap 2"
expect_out_has "GeGLU (gelu tanh)"
expect_out_has "serve-deltas with deltas and LoRA adapters on the CPU; on CUDA not yet"
run doctor --model "$models/gemma3-local"
expect_out_has "local RoPE base 10000, global 1e+06"
expect_out_has "q/k norms"

for model in gemma2-softcap gemma3-local; do
  run eval perplexity --model "$models/$model" --data "$calib" --ctx 64 --max-windows 4 --format json
  expect_rc 0
  # Bounds measured with a 4x margin on both sides: int8 within 1.4e-4 (a fold that forgets the
  # (1 + w) offset: 0.05), GPTQ int4 0.011, round-to-nearest int4 0.02, FP8 0.003.
  compress_within "$model" int_w8a8:0.001 int_w4a16:0.04 w4a16_rtn:0.08 fp8_dynamic:0.012
done

# A fine-tuned copy of gemma2-softcap: every weight moved by up to 10 %, every (1 + w) norm's w by
# up to 0.3, so the delta carries norms of its own.
python3 - "$models/gemma2-softcap" "$SCRATCH/gemma2-ft" <<'PY'
import array, json, os, random, shutil, struct, sys
src, out = sys.argv[1], sys.argv[2]
os.makedirs(out)
for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
    shutil.copy(os.path.join(src, name), out)
data = open(os.path.join(src, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
body = bytearray(data[8 + n:])
rng = random.Random(5)
for name, info in header.items():
    if name == "__metadata__":
        continue
    assert info["dtype"] == "BF16"
    begin, end = info["data_offsets"]
    words = array.array("H", bytes(body[begin:end]))
    for i, w in enumerate(words):
        x = struct.unpack("<f", struct.pack("<I", w << 16))[0]
        x = x + rng.uniform(-0.3, 0.3) if name.endswith("norm.weight") else x * (1 + rng.uniform(-0.1, 0.1))
        bits = struct.unpack("<I", struct.pack("<f", x))[0]
        words[i] = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    body[begin:end] = words.tobytes()
open(os.path.join(out, "model.safetensors"), "wb").write(data[:8 + n] + bytes(body))
PY
base="$models/gemma2-softcap"
run -q compress delta --base "$base" --finetuned "$SCRATCH/gemma2-ft" --recipe delta_2of4_int4 --calib "$calib" \
  --samples 8 --seq-len 64 -o "$SCRATCH/gemma2-delta"
expect_rc 0
read -r apart _ <<<"$(kl_of "$base" "$SCRATCH/gemma2-ft")"
read -r merged _ <<<"$(kl_of "$base" "$SCRATCH/gemma2-ft" --delta "$SCRATCH/gemma2-delta")"
below "$(python3 -c "print($merged * 5)")" "$apart" ||
  fail "base + delta is not 5x closer to the fine-tuned model than the base (KL $merged vs $apart)"

start_serve_deltas "$base" --delta "ft=$SCRATCH/gemma2-delta"
for model in gemma2-softcap ft; do
  expect_eq "$(complete "$model")" "200 6"
done
kill -TERM "$server"
wait "$server"
server=""

# Mixtures of experts: eval runs them; every weight recipe compresses them (per-expert GPTQ beating
# round-to-nearest), and an independent reader unpacks every expert of the int4 output within
# half a step of its weight (round to nearest; with BF16 scales a step rounded up to 8/256 more at
# the clamp) with the routers untouched; compress delta refuses them by name (exit 2).
cat >"$SCRATCH/awq_w8.yaml" <<'YAML'
name: awq_w8
description: AWQ's search and folds with 8-bit asymmetric groups, whose rounding barely moves the function; k_proj left unquantized
scheme:
  weights: {num_bits: 8, type: int, symmetric: false, strategy: group, group_size: 128}
calibration: {samples: 8, sequence_length: 64, sampler: uniform}
layers:
  targets: [Linear]
  ignore: [lm_head, "re:.*k_proj$"]
awq: {grid: 20, duo_scaling: true}
algorithm: {method: rtn}
YAML
for model in mixtral-moe qwen3-moe qwen2-moe; do
  run eval perplexity --model "$models/$model" --data "$calib" --ctx 64 --max-windows 4
  expect_rc 0
  # Measured KL: int8 0.009 / 0.002 / 0.002, GPTQ int4 0.11 / 0.07 / 0.05, round-to-nearest int4
  # 0.18 / 0.13 / 0.13, FP8 0.05 / 0.03 / 0.02 (mixtral-moe / qwen3-moe / qwen2-moe: a changed top-k
  # choice moves a token's output a lot).
  compress_within "$model" int_w8a8:0.02 int_w4a16:0.25 w4a16_rtn:0.4 fp8_dynamic:0.1
  unpack_int4 "$model" w4a16_rtn || fail "$model: the round-to-nearest int4 experts do not unpack to their weights"
  # GPTQ moves weights by more than half a step to lower the output's error: its experts unpack
  # within 25 % of the weights' norm (measured 15 %), the routers untouched.
  unpack_int4 "$model" int_w4a16 0.25 || fail "$model: the GPTQ int4 experts do not unpack near their weights"
  # AWQ smooths the experts (llm-compressor's MoE mappings): the norm's factors fold into every
  # expert's gate and up and into the router, each expert's into its up and down. The folds are
  # read back (a router or an ignored k_proj left unscaled fails awq_folds); at 8 bits, where
  # rounding barely moves the function, the folded model stays as close to the original as int8
  # does (measured KL 0.008 / 0.001 / 0.001, int_w8a8 0.009 / 0.002 / 0.002); at 4 bits AWQ
  # measured 0.16 / 0.08 / 0.08.
  run -q compress --model "$models/$model" --recipe "$SCRATCH/awq_w8.yaml" --calib "$calib" --samples 8 \
    --seq-len 64 -o "$SCRATCH/$model-awq_w8"
  expect_rc 0
  awq_folds "$model" "$SCRATCH/$model-awq_w8" || fail "$model: AWQ's factors are not folded into the router or k_proj"
  read -r kl _ <<<"$(kl_of "$SCRATCH/$model-awq_w8" "$models/$model")"
  below "$kl" 0.02 || fail "$model: AWQ at 8 bits moved the function: KL $kl"
  compress_within "$model" awq_w4a16:0.4
  # NVFP4 activations on the experts: each expert's gate and up share one input_global_scale (what
  # vLLM's fused w13 reads), its down has its own, all from the rows it is calibrated on; measured
  # KL 0.29 / 0.19 / 0.17 (nvfp4a16 0.20 / 0.10 / 0.10).
  compress_within "$model" nvfp4:0.6
  python3 - "$SCRATCH/$model-nvfp4" <<'PY' || fail "$model: the experts' NVFP4 input global scales are wrong"
import json, struct, sys
data = open(sys.argv[1] + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
def scalar(name):
    info = header[name]
    assert info["dtype"] == "F32" and info["shape"] == [1], name
    return struct.unpack("<f", data[8 + n + info["data_offsets"][0]:8 + n + info["data_offsets"][1]])[0]
experts = {k.rsplit(".", 2)[0] for k in header if ".experts." in k and k.endswith(".weight_packed")}
assert experts
for expert in experts:
    names = [k for k in header if k.startswith(expert + ".") and k.endswith(".input_global_scale")]
    scales = {k.rsplit(".", 2)[1]: scalar(k) for k in names}
    assert len(scales) == 3 and all(v > 0 for v in scales.values()), (expert, scales)
    gate, up = [v for k, v in scales.items() if k in ("gate_proj", "w1")], [v for k, v in scales.items() if k in ("up_proj", "w3")]
    assert gate == up, (expert, scales)
PY
  run compress delta --base "$models/$model" --finetuned "$models/$model" --recipe delta_2of4_int4 --calib "$calib" \
    -o "$SCRATCH/$model-delta"
  expect_rc 2
  expect_err_has "compress delta does not handle mixture-of-experts models"
done
# Each expert's calibration tokens are reported: with their own routing they add up to top-k per
# token; with --all-experts every expert saw every token.
run -q compress --model "$models/qwen3-moe" --recipe int_w4a16 --calib "$calib" --samples 8 --seq-len 64 \
  --all-experts -o "$SCRATCH/qwen3-moe-all"
expect_rc 0
python3 - "$SCRATCH/qwen3-moe-int_w4a16" "$SCRATCH/qwen3-moe-all" <<'PY' || fail "expert token counts are wrong"
import json, sys
def tokens(folder):
    report = json.load(open(folder + "/compression_report.json"))
    rows = {l["module"]: l["calibration_tokens"] for l in report["layers"] if "calibration_tokens" in l}
    return report["calibration"], rows
calibration, own = tokens(sys.argv[1])
_, everyone = tokens(sys.argv[2])
total = sum(calibration["sample_lengths"]) if "sample_lengths" in calibration else None
gates = {m: t for m, t in own.items() if m.endswith("gate_proj")}
layer0 = [t for m, t in gates.items() if m.startswith("model.layers.0.")]
all0 = {t for m, t in everyone.items() if m.startswith("model.layers.0.")}
assert len(layer0) == 8 and len(all0) == 1, (layer0, all0)
assert sum(layer0) == 3 * all0.pop(), "top-3 routing should send 3 tokens' worth to the experts in all"
assert "model.layers.1.mlp.gate_proj" not in own  # the dense layer is no expert
PY
run doctor --model "$models/qwen3-moe"
expect_out_has "8 experts, top-3 of width 32 on 2 of 3 layers"
expect_out_has "compress (every recipe, per expert; not compress delta yet)"
start_serve_deltas "$models/mixtral-moe"
expect_eq "$(complete mixtral-moe)" "200 6"
kill -TERM "$server"
wait "$server"
server=""

# Phi-3: doctor names its features; eval runs it past its LongRoPE threshold (windows of 64 > 16);
# every weight recipe compresses it, the fused qkv_proj and gate_up_proj whole (an independent
# reader unpacks them), and it serves; compress delta refuses it by name.
model=phi3-longrope
run doctor --model "$models/$model"
expect_out_has "rope_scaling longrope x4, long factors past 16 tokens, attention factor 1.225"
expect_out_has "rotary on 8 of 16 head dims, fused qkv_proj and gate_up_proj"
expect_out_has "serve-deltas (no deltas or LoRA on fused modules yet)"
run eval perplexity --model "$models/$model" --data "$calib" --ctx 64 --max-windows 4
expect_rc 0
# Measured KL: int8 7e-4, GPTQ int4 0.042, round-to-nearest int4 0.096, FP8 0.013 (4x margins).
compress_within "$model" int_w8a8:0.003 int_w4a16:0.17 w4a16_rtn:0.4 fp8_dynamic:0.05
unpack_int4 "$model" w4a16_rtn || fail "$model: the round-to-nearest int4 fused modules do not unpack to their weights"
python3 - "$SCRATCH/$model-int_w4a16/model.safetensors" <<'PY' || fail "$model: the output does not keep the fused names"
import json, struct, sys
data = open(sys.argv[1], "rb").read()
names = json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]])
assert names["model.layers.0.self_attn.qkv_proj.weight_packed"]["shape"] == [128, 8]  # 64 + 2 x 32 rows
assert names["model.layers.0.mlp.gate_up_proj.weight_packed"]["shape"] == [320, 8]  # 2 x 160 rows
assert not any("q_proj" in n or "mlp.up_proj" in n for n in names)
PY
run compress delta --base "$models/$model" --finetuned "$models/$model" --recipe delta_2of4_int4 --calib "$calib" \
  -o "$SCRATCH/$model-delta"
expect_rc 2
expect_err_has "compress delta does not handle fused qkv_proj / gate_up_proj yet (Phi3ForCausalLM)"
start_serve_deltas "$models/$model"
expect_eq "$(complete "$model")" "200 6"
kill -TERM "$server"
wait "$server"
server=""

# An architecture optkit does not run exits 2 naming it and listing the ones it does.
mkdir "$SCRATCH/falcon"
cp "$models/gemma2-softcap/"{tokenizer.json,tokenizer_config.json,model.safetensors} "$SCRATCH/falcon/"
python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c["architectures"] = ["FalconForCausalLM"]; json.dump(c, open(sys.argv[2], "w"))' \
  "$models/gemma2-softcap/config.json" "$SCRATCH/falcon/config.json"
run eval perplexity --model "$SCRATCH/falcon" --data "$calib" --ctx 64
expect_rc 2
expect_err_has "architecture 'FalconForCausalLM' is not supported (supported: LlamaForCausalLM"
expect_err_has "Gemma3ForCausalLM, Phi3ForCausalLM, MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM)"
