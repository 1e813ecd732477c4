#!/usr/bin/env bash
# optkit compress --plan: a mixed-precision plan (bits per decoder layer, from plan hetero's JSON)
# applied by a weight-only recipe writes one compressed-tensors model with a config group per
# bitwidth and the plan's 16-bit layers ignored; an independent reader (pure Python) unpacks every
# layer at its own bitwidth and finds it within half a quantization step of the original weights; eval
# perplexity runs it; a plan from plan hetero on the same model is executable as it is; a plan
# for another model, a recipe that cannot carry per-layer bits, or a plan with nothing to
# compress exits 2 with no output.
source "$(dirname "$0")/lib.sh"
: "${OPTKIT_SOURCE_DIR:?}"
tiny="$OPTKIT_SOURCE_DIR/testdata/models/tiny-base"
heldout="$OPTKIT_SOURCE_DIR/testdata/corpora/english.heldout.txt"
calib="$OPTKIT_SOURCE_DIR/testdata/corpora/english.calib.txt"

printf '{"model": "tiny-base", "layer_bits": [4, 3, 16, 8]}\n' >"$SCRATCH/plan.json"
run compress --model "$tiny" --recipe w4a16_rtn --plan "$SCRATCH/plan.json" -o "$SCRATCH/mixed" --format json
expect_rc 0
python3 - "$OUT" "$SCRATCH/mixed" "$tiny" <<'PY' || fail "compress --plan output: $OUT"
import json, struct, sys

out, mixed, source = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
assert out["plan"]["layer_bits"] == [4, 3, 16, 8], out["plan"]

def tensors(folder):
    with open(f"{folder}/model.safetensors", "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    def get(name):
        t = header.get(name)
        if t is None:
            return None
        a, b = t["data_offsets"]
        raw = data[a:b]
        if t["dtype"] == "BF16":
            values = [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
        else:
            code = {"I32": "i", "I64": "q", "F32": "f"}[t["dtype"]]
            values = list(struct.unpack(f"<{len(raw) // struct.calcsize(code)}{code}", raw))
        return t["shape"], values
    return get

q = json.load(open(f"{mixed}/config.json"))["quantization_config"]
assert q["format"] == "pack-quantized", q
groups = {g["weights"]["num_bits"]: g for g in q["config_groups"].values()}
assert sorted(groups) == [3, 4, 8], groups
assert groups[4]["targets"] == ["re:model[.]layers[.](0)[.]"], groups[4]
assert groups[3]["targets"] == ["re:model[.]layers[.](1)[.]"], groups[3]
assert groups[8]["targets"] == ["re:model[.]layers[.](3)[.]"], groups[8]
assert all(g["weights"]["group_size"] == 128 for g in groups.values())
assert "re:model[.]layers[.](2)[.]" in q["ignore"] and "lm_head" in q["ignore"], q["ignore"]
assert json.load(open(f"{mixed}/compression_report.json"))["plan"]["layer_bits"] == [4, 3, 16, 8]

new, old = tensors(mixed), tensors(source)
for layer, bits in enumerate([4, 3, 16, 8]):
    for module in ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                   "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]:
        p = f"model.layers.{layer}.{module}"
        (rows, cols), w = old(f"{p}.weight")
        if bits == 16:
            assert new(f"{p}.weight_packed") is None and new(f"{p}.weight") == ([rows, cols], w), p
            continue
        per_word = 32 // bits
        shape, words = new(f"{p}.weight_packed")
        assert shape == [rows, -(-cols // per_word)], (p, shape)
        assert new(f"{p}.weight_shape")[1] == [rows, cols], p
        sshape, scales = new(f"{p}.weight_scale")
        groups_per_row = -(-cols // 128)
        assert sshape == [rows, groups_per_row], (p, sshape)
        mask, offset = (1 << bits) - 1, 1 << (bits - 1)
        for r in range(rows):
            row = words[r * shape[1]:(r + 1) * shape[1]]
            for c in range(cols):
                value = ((row[c // per_word] & 0xFFFFFFFF) >> (bits * (c % per_word)) & mask) - offset
                s = scales[r * groups_per_row + c // 128]
                err = abs(value * s - w[r * cols + c])
                # Half a step, plus the scale's bf16 rounding at the clamped end of the grid.
                assert err <= 0.5 * s + 0.01 * abs(w[r * cols + c]) + 1e-6, (p, bits, r, c, value, s)
PY
run eval perplexity --model "$SCRATCH/mixed" --data "$heldout" --ctx 128 --format json
expect_rc 0
python3 -c 'import json,math,sys; p=json.loads(sys.argv[1])["perplexity"]; sys.exit(0 if math.isfinite(p) and p > 1 else 1)' \
  "$OUT" || fail "perplexity of the mixed model: $OUT"

# A plan from plan hetero for this model (measured indicator, bits 4 or 8) runs as it is, with GPTQ.
printf 'groups:\n  - {gpu: t4, count: 1, node: a}\n  - {gpu: l4, count: 1, node: b}\n' >"$SCRATCH/pair.yaml"
run plan hetero --cluster "$SCRATCH/pair.yaml" --model "$tiny" --isl 64 --osl 16 --batch 4 --bits 4,8 \
  --theta 0.0005 --calib "$calib" --calib-samples 4 --calib-length 64 --threads 1 --format json \
  -o "$SCRATCH/hetero.json"
expect_rc 0
run compress --model "$tiny" --recipe int_w4a16 --calib "$calib" --samples 8 --seq-len 64 \
  --plan "$SCRATCH/hetero.json" -o "$SCRATCH/planned"
expect_rc 0
expect_out_has "at the plan's layer bits"
run eval perplexity --model "$SCRATCH/planned" --data "$heldout" --ctx 128
expect_rc 0

printf '{"layer_bits": [4, 4, 4]}\n' >"$SCRATCH/short.json"
run compress --model "$tiny" --recipe w4a16_rtn --plan "$SCRATCH/short.json" -o "$SCRATCH/bad1"
expect_rc 2
expect_err_has "bits for 3 layers"
printf '{"layer_bits": [16, 16, 16, 16]}\n' >"$SCRATCH/none.json"
run compress --model "$tiny" --recipe w4a16_rtn --plan "$SCRATCH/none.json" -o "$SCRATCH/bad2"
expect_rc 2
expect_err_has "nothing to compress"
printf '{"layer_bits": [4, 12, 4, 4]}\n' >"$SCRATCH/twelve.json"
run compress --model "$tiny" --recipe w4a16_rtn --plan "$SCRATCH/twelve.json" -o "$SCRATCH/bad3"
expect_rc 2
expect_err_has "layer_bits[1] is 12"
run compress --model "$tiny" --recipe fp8_dynamic --plan "$SCRATCH/plan.json" -o "$SCRATCH/bad4"
expect_rc 2
expect_err_has "weight-only integer recipe"
printf '{"layer_bits": [4, 3,' >"$SCRATCH/broken.json"
run compress --model "$tiny" --recipe w4a16_rtn --plan "$SCRATCH/broken.json" -o "$SCRATCH/bad5"
expect_rc 2
expect_err_has "broken.json"
cat >"$SCRATCH/mlp_only.yaml" <<'EOF'
name: mlp_only
description: int4 round-to-nearest on the MLP only
scheme:
  weights: {num_bits: 4, type: int, symmetric: true, strategy: group, group_size: 128}
layers:
  targets: ["re:.*mlp.*"]
algorithm: {method: rtn}
EOF
run compress --model "$tiny" --recipe "$SCRATCH/mlp_only.yaml" --plan "$SCRATCH/plan.json" -o "$SCRATCH/bad6"
expect_rc 2
expect_err_has "targets only some layers"
for d in bad1 bad2 bad3 bad4 bad5 bad6; do [ ! -e "$SCRATCH/$d" ] || fail "a refused plan left $d"; done
