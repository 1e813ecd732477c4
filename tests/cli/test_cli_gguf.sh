# optkit compress to GGUF and the GGUF back through optkit: a Q4_K_M file from an importance
# matrix is written atomically, archived and reported; eval perplexity runs on it and lands near
# the BF16 model's; doctor reads its file type; the bad inputs are one line and exit 2 with nothing
# written (a name without .gguf, an existing output, a GGUF as compress input, a recipe mixing
# gguf with a scheme, an architecture GGUF export does not write).
. "$(dirname "$0")/lib.sh"
MODEL="$OPTKIT_SOURCE_DIR/testdata/models/tiny-base"
CORPORA="$OPTKIT_SOURCE_DIR/testdata/corpora"

run --quiet compress --model "$MODEL" --recipe q4_k_m --calib "$CORPORA/english.calib.txt" --samples 16 \
  -o "$SCRATCH/base.gguf" --format json
expect_rc 0
[ -f "$SCRATCH/base.gguf" ] || fail "no GGUF written"
[ -z "$(find "$SCRATCH" -maxdepth 1 -name '.*base.gguf*')" ] || fail "a staging folder was left: $(ls -a "$SCRATCH")"
python3 - "$OUT" <<'PY' || fail "compress report: $OUT"
import json, sys
r = json.loads(sys.argv[1])
t = r["trials"][0]
assert t["succeeded"], t
m = t["metrics"]
assert m["calibration_tokens"] > 0, m
assert 0 < m["calibration_loss"] < 0.05, m
assert m["compression_ratio"] > 2, m
PY
expect_eq "$(head -c 4 "$SCRATCH/base.gguf")" "GGUF"
expect_eq "$(sql "SELECT COUNT(*) FROM artifacts WHERE path LIKE '%base.gguf'")" 1

# The file as a model: perplexity within 5 % of the BF16 folder's on held-out text.
run --quiet eval perplexity --model "$MODEL" --data "$CORPORA/english.heldout.txt" --ctx 128 --format json
expect_rc 0
bf16=$OUT
run --quiet eval perplexity --model "$SCRATCH/base.gguf" --data "$CORPORA/english.heldout.txt" --ctx 128 --format json
expect_rc 0
python3 - "$bf16" "$OUT" <<'PY' || fail "GGUF perplexity vs BF16: $OUT"
import json, sys
b, g = json.loads(sys.argv[1])["perplexity"], json.loads(sys.argv[2])["perplexity"]
assert b < g < 1.05 * b, (b, g)
PY

run doctor --model "$SCRATCH/base.gguf" --format json
python3 - "$OUT" <<'PY' || fail "doctor on a GGUF: $OUT"
import json, sys
checks = {c["check"]: c for c in json.loads(sys.argv[1])["checks"]}
q = checks["quantization"]
assert q["status"] == "ok" and "GGUF Q4_K_M (general.file_type 15)" in q["detail"], q
assert "importance matrix from" in q["detail"], q
assert checks["tokenizer sample"]["status"] == "ok", checks["tokenizer sample"]
assert checks["chat template"]["status"] == "ok", checks["chat template"]
PY

# Bad inputs: one line, exit 2, nothing written.
run compress --model "$MODEL" --recipe q8_0 -o "$SCRATCH/base-q8"
expect_rc 2
expect_err_has "writes one GGUF file: name it <something>.gguf"
[ ! -e "$SCRATCH/base-q8" ] || fail "wrote $SCRATCH/base-q8"
run compress --model "$MODEL" --recipe q8_0 -o "$SCRATCH/base.gguf"
expect_rc 2
expect_err_has "already exists"
run compress --model "$SCRATCH/base.gguf" --recipe q8_0 -o "$SCRATCH/again.gguf"
expect_rc 2
expect_err_has "reads Hugging Face safetensors folders, not GGUF files"
[ ! -e "$SCRATCH/again.gguf" ] || fail "wrote again.gguf"
cat >"$SCRATCH/mixed.yaml" <<'YAML'
name: mixed
description: both kinds
gguf: {file_type: Q6_K}
scheme: {weights: {num_bits: 4}}
YAML
run compress --model "$MODEL" --recipe "$SCRATCH/mixed.yaml" -o "$SCRATCH/mixed.gguf"
expect_rc 2
expect_err_has "either scheme (compressed-tensors) or gguf"
mkdir "$SCRATCH/qwen"
cp "$MODEL"/* "$SCRATCH/qwen/"
python3 - "$SCRATCH/qwen/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["architectures"], c["model_type"] = ["Qwen2ForCausalLM"], "qwen2"
json.dump(c, open(sys.argv[1], "w"))
PY
run compress --model "$SCRATCH/qwen" --recipe q4_k_m -o "$SCRATCH/qwen.gguf"
expect_rc 2
expect_err_has "GGUF export writes llama.cpp's llama architecture"
[ ! -e "$SCRATCH/qwen.gguf" ] || fail "wrote qwen.gguf"
echo "test_cli_gguf: ok"
