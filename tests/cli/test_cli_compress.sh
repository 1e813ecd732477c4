#!/usr/bin/env bash
# optkit compress, black-box: int_w4a16 in 3 parallel trials writes a compressed-tensors folder
# (checked with an independent safetensors header reader) that eval perplexity runs; W8A8 and FP8
# layouts; sharded output (--max-shard-size) with its index; --max-memory kept or refused; compress delta ratios; bad input exits 2 (disk full exits 3) with no partial output
# and the run archived as failed.
source "$(dirname "$0")/lib.sh"
: "${OPTKIT_SOURCE_DIR:?}"
models="$OPTKIT_SOURCE_DIR/testdata/models"
corpora="$OPTKIT_SOURCE_DIR/testdata/corpora"
calib="$corpora/english.calib.txt"

json_field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d$2)" <<<"$1"; }
# header FOLDER TENSOR: "DTYPE [shape]" from the safetensors header, read without optkit.
header() {
  python3 - "$1/model.safetensors" "$2" <<'PY'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    h = json.loads(f.read(n))
t = h.get(sys.argv[2])
print("absent" if t is None else f"{t['dtype']} {t['shape']}")
PY
}
ppl_of() {
  run eval perplexity --model "$1" --data "$corpora/$2.heldout.txt" --ctx 128 --format json ${3:+--delta "$3"}
  expect_rc 0
  PPL=$(json_field "$OUT" "['perplexity']")
}
within() { python3 -c "import sys; a,b,t=map(float,sys.argv[1:]); sys.exit(0 if abs(a-b) <= t*b else 1)" "$@"; }

run compress --list-recipes
expect_rc 0
for r in int_w8a8 int_w4a16 w4a16_rtn w4a8 fp8_dynamic fp8_block nvfp4 nvfp4a16 mxfp4 awq_w4a16 sparse24_int4 \
  delta_2of4_int4 delta_2of4_int2; do expect_out_has "$r"; done
expect_out_has "scheme.weights.num_bits"

# The acceptance run: 3 trials, 2 at a time.
out="$SCRATCH/w4"
run compress --model "$models/tiny-base" --recipe int_w4a16 --calib "$calib" --samples 48 --seq-len 128 --trials 3 \
  --jobs 2 -o "$out" --format json
expect_rc 0
run_id=$(json_field "$OUT" "['run_id']")
expect_eq "$(json_field "$OUT" "['summary']['calibration_loss']['n']")" 3
qc=$(python3 -c "import json; print(json.dumps(json.load(open('$out/config.json'))['quantization_config'], sort_keys=True))")
expect_eq "$(json_field "$qc" "['quant_method']")" "compressed-tensors"
expect_eq "$(json_field "$qc" "['format']")" "pack-quantized"
expect_eq "$(json_field "$qc" "['sparsity_config']")" "{}"
expect_eq "$(json_field "$qc" "['config_groups']['group_0']['weights']['group_size']")" 128
expect_eq "$(header "$out" model.layers.0.self_attn.q_proj.weight_packed)" "I32 [192, 24]"
expect_eq "$(header "$out" model.layers.0.self_attn.q_proj.weight_scale)" "BF16 [192, 2]"
expect_eq "$(header "$out" model.layers.0.self_attn.q_proj.weight_shape)" "I64 [2]"
expect_eq "$(header "$out" model.layers.0.self_attn.q_proj.weight)" "absent"
expect_eq "$(header "$out" model.layers.3.mlp.down_proj.weight_packed)" "I32 [192, 64]"
expect_eq "$(header "$out" lm_head.weight)" "BF16 [2048, 192]"
for f in tokenizer.json tokenizer_config.json recipe.yaml compression_report.json; do
  [ -f "$out/$f" ] || fail "compressed model lacks $f"
done
[ -z "$(find "$out" -maxdepth 1 -name 'trial-*')" ] || fail "the other trials' folders were left in $out"
expect_eq "$(sql "SELECT count(*) FROM trials WHERE run_id=$run_id AND status='succeeded'")" 3
expect_eq "$(sql "SELECT count(DISTINCT trial_id) FROM metrics WHERE run_id=$run_id AND name='calibration_loss'")" 3
[ "$(sql "SELECT count(*) FROM metrics WHERE run_id=$run_id AND name='layer_relative_error'")" -eq 84 ] ||
  fail "expected 28 per-layer errors for each of 3 trials"
run runs show "$run_id"
expect_rc 0
expect_out_has "calibration_loss"
ls -a "$SCRATCH" | grep -q "\.partial\." && fail "temporary trial folders were left behind"
ppl_of "$models/tiny-base" english
base=$PPL
ppl_of "$out" english
within "$PPL" "$base" 0.01 || fail "int_w4a16 perplexity $PPL is not within 1% of the base's $base"

# W8A8 (SmoothQuant + GPTQ int8) and FP8 layouts.
run compress --model "$models/tiny-base" --recipe int_w8a8 --calib "$calib" --samples 32 --seq-len 128 -o "$SCRATCH/w8"
expect_rc 0
expect_eq "$(header "$SCRATCH/w8" model.layers.1.mlp.up_proj.weight)" "I8 [512, 192]"
expect_eq "$(header "$SCRATCH/w8" model.layers.1.mlp.up_proj.weight_scale)" "BF16 [512, 1]"
expect_eq "$(python3 -c "import json; print(json.load(open('$SCRATCH/w8/config.json'))['quantization_config']['format'])")" \
  "int-quantized"
ppl_of "$SCRATCH/w8" english
within "$PPL" "$base" 0.01 || fail "int_w8a8 perplexity $PPL is not within 1% of the base's $base"
run compress --model "$models/tiny-base" --recipe fp8_dynamic -o "$SCRATCH/fp8"
expect_rc 0
expect_eq "$(header "$SCRATCH/fp8" model.layers.2.self_attn.o_proj.weight)" "F8_E4M3 [192, 192]"
ppl_of "$SCRATCH/fp8" english
within "$PPL" "$base" 0.01 || fail "fp8_dynamic perplexity $PPL is not within 1% of the base's $base"
fp8_ppl=$PPL
run doctor --model "$SCRATCH/fp8"
expect_out_has "compressed-tensors float-quantized: FP8_DYNAMIC on Linear; ignored: lm_head"
# An FP8 KV cache: calibrated K and V scales, which the runtime applies as it caches.
run compress --model "$models/tiny-base" --recipe fp8_dynamic_kv --calib "$calib" --samples 16 --seq-len 64 \
  -o "$SCRATCH/fp8kv"
expect_rc 0
expect_eq "$(header "$SCRATCH/fp8kv" model.layers.3.self_attn.k_scale)" "BF16 [1]"
ppl_of "$SCRATCH/fp8kv" english
within "$PPL" "$base" 0.02 || fail "fp8_dynamic_kv perplexity $PPL is not within 2% of the base's $base"
[ "$PPL" != "$fp8_ppl" ] || fail "the FP8 KV cache changed nothing: $PPL"
run doctor --model "$SCRATCH/fp8kv"
expect_out_has "FP8 KV cache, scales per tensor"
# What vLLM cannot load is said once, on stderr, and the output is still written for optkit.
run compress --model "$models/tiny-base" --recipe sparse24_int4 --calib "$calib" --samples 8 --seq-len 64 \
  -o "$SCRATCH/s24"
expect_rc 0
expect_err_has "vLLM no longer loads 2:4-sparse checkpoints"
expect_eq "$(grep -c "2:4-sparse" <<<"$ERR")" 1

# Sharded output: shards of at most 64 KiB (a larger tensor alone in its own) and the index
# transformers and vLLM read, holding byte for byte the tensors of the single file.
run compress --model "$models/tiny-base" --recipe fp8_dynamic --max-shard-size 64KiB -o "$SCRATCH/fp8-sharded"
expect_rc 0
python3 - "$SCRATCH/fp8-sharded" "$SCRATCH/fp8/model.safetensors" <<'PY' || fail "the sharded output is not the single file's tensors"
import json, os, struct, sys
def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n)); data = f.read()
    h.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in h.items()}
folder, single = sys.argv[1], read(sys.argv[2])
index = json.load(open(os.path.join(folder, "model.safetensors.index.json")))
shards = sorted(set(index["weight_map"].values()))
assert len(shards) > 3 and not os.path.exists(os.path.join(folder, "model.safetensors")), shards
seen = {}
for name in shards:
    tensors = read(os.path.join(folder, name))
    assert sum(len(t[2]) for t in tensors.values()) <= 65536 or len(tensors) == 1, name
    assert all(index["weight_map"][k] == name for k in tensors), name
    seen.update(tensors)
assert seen == single, sorted(set(seen) ^ set(single))
assert index["metadata"]["total_size"] == sum(len(t[2]) for t in seen.values())
PY
ppl_of "$SCRATCH/fp8-sharded" english
expect_eq "$PPL" "$fp8_ppl"
# --max-memory: kept by spilling the calibration states when only that fits (the same bytes out),
# refused at start with what it needs when it cannot be kept.
run compress --model "$models/tiny-base" --recipe int_w8a8 --calib "$calib" --samples 16 --seq-len 64 \
  -o "$SCRATCH/w8-memory" --format json
expect_rc 0
expect_eq "$(json_field "$OUT" "['memory']['calibration_states_spilled']")" "False"
in_memory=$(json_field "$OUT" "['memory']['estimate_in_memory_bytes']")
spilled=$(json_field "$OUT" "['memory']['estimate_spilled_bytes']")
peak=$(json_field "$OUT" "['memory']['trial_peak_bytes'][0]")
[ "$peak" -le "$in_memory" ] || fail "the trial peaked at $peak bytes, over the estimate of $in_memory"
[ "$spilled" -lt "$in_memory" ] || fail "spilling the states saves nothing: $spilled vs $in_memory"
run compress --model "$models/tiny-base" --recipe int_w8a8 --calib "$calib" --samples 16 --seq-len 64 \
  --max-memory $(((in_memory + spilled) / 2)) -o "$SCRATCH/w8-spilled" --format json
expect_rc 0
expect_eq "$(json_field "$OUT" "['memory']['calibration_states_spilled']")" "True"
cmp "$SCRATCH/w8-memory/model.safetensors" "$SCRATCH/w8-spilled/model.safetensors" ||
  fail "spilled calibration states changed the compressed model"
[ "$(ls -A "$SCRATCH/w8-spilled")" = "$(ls -A "$SCRATCH/w8-memory")" ] ||
  fail "the spill left a file in the output: $(ls -A "$SCRATCH/w8-spilled")"
run compress --model "$models/tiny-base" --recipe int_w8a8 --calib "$calib" --max-memory 1MiB -o "$SCRATCH/bad"
expect_rc 2
expect_err_has "--max-memory 1 MB: compress --recipe int_w8a8 needs"
expect_err_has "for a layer"
expect_err_has "raise --max-memory"
[ -e "$SCRATCH/bad" ] && fail "a refused --max-memory left $SCRATCH/bad behind"
run compress --model "$models/tiny-base" --recipe fp8_dynamic --max-shard-size 0 -o "$SCRATCH/bad"
expect_rc 2
expect_err_has "--max-shard-size '0': expected a size such as 4GiB"
[ -e "$SCRATCH/bad" ] && fail "a refused --max-shard-size left $SCRATCH/bad behind"

# DeltaZip: int2 2:4 delta of a variant is at least 8x smaller than the fp16 variant.
run compress delta --base "$models/tiny-base" --finetuned "$models/tiny-licenses" --recipe delta_2of4_int2 \
  --calib "$corpora/licenses.calib.txt" --samples 48 --seq-len 128 -o "$SCRATCH/d2" --format json
expect_rc 0
ratio=$(json_field "$OUT" "['trials'][0]['metrics']['compression_ratio']")
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 8 else 1)" "$ratio" || fail "delta_2of4_int2 ratio $ratio < 8"
[ -f "$SCRATCH/d2/delta.safetensors.zst" ] || fail "the zstd stage did not run"
expect_eq "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['levels'])" "$SCRATCH/d2/delta_config.json")" \
  midrise
# The LM head's Δ is calibrated (GPTQ on the final-normed outputs), so its output error is small.
head_error=$(python3 -c "import json,sys; print([l['relative_error'] for l in json.load(open(sys.argv[1]))['layers']
      if l['module'] == 'lm_head'][0])" "$SCRATCH/d2/compression_report.json")
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 0.05 else 1)" "$head_error" ||
  fail "lm_head's delta was not calibrated (relative output error $head_error)"
ppl_of "$models/tiny-licenses" licenses
variant=$PPL
ppl_of "$models/tiny-base" licenses "$SCRATCH/d2"
# DeltaZip's quality bar (#5): base + delta within 2 % of the variant's own-domain perplexity.
within "$PPL" "$variant" 0.02 || fail "base + delta perplexity $PPL is not within 2% of the variant's $variant"
run eval perplexity --model "$models/tiny-code" --delta "$SCRATCH/d2" --data "$corpora/licenses.heldout.txt" --ctx 64
expect_rc 2
expect_err_has "different base"

# Bad input: exit 2, one line, no output folder, archived as failed.
failed_run() {
  expect_eq "$(sql "SELECT status FROM runs ORDER BY id DESC LIMIT 1")" "$1"
  [ -e "$SCRATCH/bad" ] && fail "a failed compress left $SCRATCH/bad behind"
  ls -a "$SCRATCH" | grep -q "\.partial\." && fail "a failed compress left its temporary folder"
  return 0
}
run compress --model "$models/tiny-base" --recipe int_w4a61 --calib "$calib" -o "$SCRATCH/bad"
expect_rc 2
expect_err_has "did you mean 'int_w4a16'"
failed_run failed
printf 'name: x\ndescription: y\nscheme:\n  weights: {num_bits: 4, stratgy: group}\n' >"$SCRATCH/r.yaml"
run compress --model "$models/tiny-base" --recipe "$SCRATCH/r.yaml" -o "$SCRATCH/bad"
expect_rc 2
expect_err_has "r.yaml:4:"
expect_err_has "did you mean 'scheme.weights.strategy'"
run compress --model "$models/tiny-base" --recipe int_w4a16 -o "$SCRATCH/bad"
expect_rc 2
expect_err_has "needs calibration data: pass --calib FILE"
: >"$SCRATCH/empty.txt"
run compress --model "$models/tiny-base" --recipe int_w4a16 --calib "$SCRATCH/empty.txt" -o "$SCRATCH/bad"
expect_rc 2
expect_err_has "no document of at least 8 tokens"
failed_run failed
mkdir "$SCRATCH/other" && cp "$models/oracle/qwen2-bias/"{config.json,model.safetensors} "$models/tiny-base/tokenizer.json" \
  "$SCRATCH/other/"
run compress delta --base "$SCRATCH/other" --finetuned "$models/tiny-code" --recipe delta_2of4_int4 \
  --calib "$calib" -o "$SCRATCH/bad"
expect_rc 2
expect_err_has "is not a fine-tune of --base"
run compress --model "$models/tiny-base" --recipe delta_2of4_int2 --calib "$calib" -o "$SCRATCH/bad"
expect_rc 2
expect_err_has "is a delta recipe"
run compress --model "$models/tiny-base" --recipe fp8_dynamic -o "$SCRATCH/w4"
expect_rc 2
expect_err_has "already exists"
# A write that fails (the file size limit stands in for a full disk): exit 3, nothing left.
(ulimit -f 1500 && "$OPTKIT" compress --model "$models/tiny-base" --recipe fp8_dynamic -o "$SCRATCH/bad" \
  >/dev/null 2>"$SCRATCH/full.err")
rc=$?
[ "$rc" -eq 3 ] || fail "a failed write exited $rc, not 3: $(cat "$SCRATCH/full.err")"
failed_run failed
echo "ok"
