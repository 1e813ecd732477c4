# optkit plan hetero (SplitQuant): Llama-3.1-70B over 2×A100-40G + 2×V100-32G gives a feasible JSON
# plan — contiguous stages covering every layer, memory within each GPU's capacity, one bitwidth
# per layer from --bits — also written with -o and archived; a cluster too small is exit 1 saying
# how much memory is missing; a malformed cluster file is exit 2 with file:line:col.
. "$(dirname "$0")/lib.sh"

run plan hetero --cluster a100-40g-x2-v100-x2 --model llama-3.1-70b --isl 512 --osl 128 --batch 32 \
  --time-limit 5 --format json -o "$SCRATCH/plan.json"
expect_rc 0
python3 - "$OUT" "$SCRATCH/plan.json" <<'PY' || fail "plan hetero JSON: $OUT"
import json, sys
d = json.loads(sys.argv[1])
written = json.load(open(sys.argv[2]))
assert {k: v for k, v in d.items() if k != "run_id"} == written
assert len(d["layer_bits"]) == 80 and set(d["layer_bits"]) <= {3, 4, 8, 16}
stages = d["stages"]
assert [s["gpu"] for s in stages] == d["device_order"]  # a stage per entry, each of s["tp"] GPUs
assert sorted(sum(([s["gpu"]] * s["tp"] for s in stages), [])) == ["a100_40g"] * 2 + ["v100"] * 2, stages
assert all(s["tp"] in (1, 2) and s["gpus"] == s["tp"] for s in stages), stages
assert stages[0]["layers"][0] == 0 and stages[-1]["layers"][1] == 80
for a, b in zip(stages, stages[1:]):
    assert a["layers"][1] == b["layers"][0], stages
for s in stages:
    assert s["memory_bytes"] <= s["capacity_bytes"], s
    assert s["bits"] == d["layer_bits"][s["layers"][0]:s["layers"][1]]
    assert s["sources"] == "calibrated", s  # no perf database for A100 or V100: the calibrated fallback
assert d["predicted"]["latency_s"] > 0 and d["predicted"]["throughput_tokens_per_s"] > 0
assert d["solver"]["method"] in ("ilp", "bitwidth-transfer")
assert d["objective"] <= d["solver"]["heuristic_objective"] + 1e-9
PY
run_id=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["run_id"])' "$OUT")
[ "$(sql "SELECT COUNT(*) FROM metrics WHERE run_id=$run_id AND name IN ('latency','throughput','indicator')")" = 3 ] ||
  fail "plan metrics not archived"

run plan hetero --cluster a100-40g-x2-v100-x2 --model llama-3.1-70b --solver heuristic
expect_rc 0
expect_out_has "a100_40g"

# SplitQuant's homogeneous 4×A100-40G (its cluster 10): the stages with their TP degree,
# and beside the plan the best uniform-precision PP, TP and TP+PP layouts at FP16 and the lowest
# bitwidth (Table IV's "Uniform" rows).
run plan hetero --cluster a100-40g-x4 --model llama-3.1-70b
expect_rc 0
expect_out_has "tp"
expect_out_has "mixed (plan)"
expect_out_has "uniform       TP+PP     16     TP2+PP2"
expect_out_has "uniform       PP        16     none fits"
expect_out_has "uniform       PP        3      PP4"
run plan hetero --cluster a100-40g-x4 --model llama-3.1-70b --format json
expect_rc 0
python3 - "$OUT" <<'PY' || fail "plan hetero 4xA100 JSON: $OUT"
import json, sys
d = json.loads(sys.argv[1])
assert sum(s["tp"] for s in d["stages"]) == 4, d["stages"]
rows = {(b["topology"], b["bits"]): b for b in d["uniform_baselines"]}
assert set(rows) == {(t, b) for t in ("PP", "TP", "TP+PP") for b in (16, 3)}, rows
assert rows[("TP", 16)]["layout"] == "TP4" and rows[("TP+PP", 16)]["layout"] == "TP2+PP2"
assert not rows[("PP", 16)]["fits"] and rows[("PP", 16)]["throughput_tokens_per_s"] is None
assert abs(rows[("PP", 3)]["indicator"] - 1.0) < 1e-9 and rows[("TP", 16)]["indicator"] == 0
PY

# A serving profile as the workload (the padded batch's lengths) and the plan drawn as SVG: one
# memory, prefill and decode bar per stage, read back with an XML parser.
run plan hetero --cluster a100-40g-x2-v100-x2 --model llama-3.1-70b --profile chat-small --batch 32 \
  --solver heuristic --format json --svg "$SCRATCH/plan.svg"
expect_rc 0
python3 - "$OUT" "$SCRATCH/plan.svg" <<'PY' || fail "plan hetero --profile/--svg: $OUT"
import json, sys
import xml.etree.ElementTree as ET
d = json.loads(sys.argv[1])
w = d["workload"]
assert w["profile"] == "chat-small" and w["osl"] == 16 and 64 < w["isl"] <= 128, w
svg = ET.parse(sys.argv[2]).getroot()
ns = "{http://www.w3.org/2000/svg}"
titles = [t.text for t in svg.iter(ns + "title")]
n = len(d["stages"])
for kind in ("used", "capacity", "prefill", "decode"):
    assert sum(t.startswith(kind) for t in titles) == n, (kind, titles)
text = " ".join(t.text or "" for t in svg.iter(ns + "text"))
assert "a100_40g" in text and "v100" in text and "llama-3.1-70b" in text, text
PY
run plan hetero --cluster a100-40g-x2-v100-x2 --model llama-3.1-70b --profile chat-small --isl 100
expect_rc 2
expect_err_has "--profile gives ISL and OSL"
run plan hetero --cluster a100-40g-x2-v100-x2 --model llama-3.1-70b --profile "$SCRATCH/nosuch.yaml" \
  --svg "$SCRATCH/never.svg"
expect_rc 2
expect_err_has "nosuch.yaml"
[ ! -e "$SCRATCH/never.svg" ] || fail "a failed plan wrote its SVG"

printf 'groups:\n  - {gpu: t4, count: 1}\n' >"$SCRATCH/small.yaml"
run plan hetero --cluster "$SCRATCH/small.yaml" --model llama-3.1-70b
expect_rc 1
expect_err_has "GiB missing"
expect_eq "$(sql "SELECT status FROM runs WHERE id=(SELECT MAX(id) FROM runs)")" goal_not_met

printf 'groups:\n  - {gpu: t4, count: 1}\n  - {gpu: v100, cuont: 2}\n' >"$SCRATCH/typo.yaml"
run plan hetero --cluster "$SCRATCH/typo.yaml" --model llama-3.1-8b
expect_rc 2
expect_err_has "typo.yaml:3:"
run plan hetero --cluster "$SCRATCH/nosuch.yaml" --model llama-3.1-8b
expect_rc 2
expect_err_has "nosuch.yaml"
run plan hetero --cluster a100-40g-x2-v100-x2 --model llama-3.1-8b --bits 2,4
expect_rc 2
expect_err_has "--bits 2"
[ ! -e "$SCRATCH/partial.json" ] || fail "a failed plan left an output"

# The indicator from the tiny model's weights and a calibration file through the runtime: the
# variance indicator, then the Hessian indicator, each with its cost beside the calibration pass.
printf 'groups:\n  - {gpu: t4, count: 1, node: a}\n  - {gpu: l4, count: 1, node: b}\n' >"$SCRATCH/pair.yaml"
tiny="$OPTKIT_SOURCE_DIR/testdata/models/tiny-base"
calib="$OPTKIT_SOURCE_DIR/testdata/corpora/english.calib.txt"
for indicator in variance hessian; do
  run plan hetero --cluster "$SCRATCH/pair.yaml" --model "$tiny" --isl 64 --osl 16 --batch 4 --theta 100 \
    --calib "$calib" --calib-samples 4 --calib-length 64 --indicator "$indicator" --threads 1 --format json
  expect_rc 0
  python3 - "$OUT" "$indicator" <<'PY' || fail "plan hetero --indicator $indicator: $OUT"
import json, sys
d, indicator = json.loads(sys.argv[1]), sys.argv[2]
i = d["indicator"]
assert i["source"].startswith(indicator + " (") and "english.calib.txt" in i["source"], i
assert 4 * 8 <= i["calibration_tokens"] <= 4 * 64, i
assert i["seconds"] > 0 and i["calibration_pass_seconds"] > 0 and i["variance_seconds"] > 0, i
assert (i["hessian_seconds"] > 0) == (indicator == "hessian"), i
assert len(d["layer_bits"]) == 4 and [s["layers"] for s in d["stages"]][0][0] == 0
PY
done
run plan hetero --cluster "$SCRATCH/pair.yaml" --model llama-3.1-8b --calib "$calib"
expect_rc 2
expect_err_has "--calib needs --model to be a model folder"
run plan hetero --cluster "$SCRATCH/pair.yaml" --model "$tiny" --indicator hessian
expect_rc 2
expect_err_has "--indicator hessian needs activations"
run plan hetero --cluster "$SCRATCH/pair.yaml" --model "$tiny" --calib "$SCRATCH/nosuch.txt"
expect_rc 2
expect_err_has "nosuch.txt"
