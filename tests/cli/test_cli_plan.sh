#!/usr/bin/env bash
# optkit plan, black-box: the issue's acceptance commands (JSON Pareto rows with source labels,
# --emit vllm flags matching the chosen row, --ttft 1 → exit 1 naming the closest), memory
# feasibility, target-rate sizing, perf databases, plots, and exit 2 for every kind of bad input.
source "$(dirname "$0")/lib.sh"
: "${OPTKIT_SOURCE_DIR:?}"

py() { python3 -c "$1" <<<"$OUT"; }

# The presets and systems the help points to (--list-models, --list-systems).
run plan --list-models
expect_rc 0
grep -q '^llama-3.1-70b *80 layers, hidden 8192' <<<"$OUT" || fail "plan --list-models: $OUT"
grep -q '^qwen3-235b-a22b .*MoE 128 experts (8 active)' <<<"$OUT" || fail "plan --list-models (MoE): $OUT"
run plan --list-systems
expect_rc 0
grep -q '^h200_sxm .*4800 GB/s, measured perf database' <<<"$OUT" || fail "plan --list-systems: $OUT"
grep -q '^v100 ' <<<"$OUT" || fail "plan --list-systems (v100): $OUT"

acceptance=(plan --model llama-3.1-70b --system h200_sxm --gpus 8 --isl 4000 --osl 500 --ttft 1200 --tpot 20)
run "${acceptance[@]}" --format json
expect_rc 0
py '
import json, sys
d = json.load(sys.stdin)
assert d["pareto"], "no Pareto rows"
for row in d["pareto"]:
    assert row["sources"] in ("measured", "interpolated", "extrapolated", "calibrated") or "+" in row["sources"], row
    assert row["memory_gib_per_gpu"] <= 140.4, row
best = d["best"]
assert best["meets_sla"] and best["ttft_ms"] <= 1200 and best["tpot_ms"] <= 20, best
assert all(r["tokens_per_s_per_gpu"] <= best["tokens_per_s_per_gpu"] + 1e-9 for r in d["pareto"] if r["meets_sla"])
assert d["search"]["evaluations"] > 1000
' || fail "plan JSON: $OUT"
best_tp=$(py 'import json,sys; b=json.load(sys.stdin)["best"]; print(b["decode"]["parallel"] if b["mode"]=="disagg" else b["parallel"])')
best_batch=$(py 'import json,sys; print(json.load(sys.stdin)["best"]["batch"])')
[ "$(sql "SELECT status FROM runs WHERE command = 'plan' ORDER BY id DESC LIMIT 1")" = "succeeded" ] ||
  fail "plan run not archived as succeeded"
[ "$(sql "SELECT COUNT(*) FROM metrics WHERE name = 'tokens_per_s_per_gpu'")" = "1" ] || fail "metric not archived"

# --emit vllm: the launch script's flags are the chosen row's.
run "${acceptance[@]}" --emit vllm
expect_rc 0
expect_out_has "vllm serve meta-llama/Llama-3.1-70B-Instruct"
tp=${best_tp#tp}; tp=${tp%%pp*}
expect_out_has "--tensor-parallel-size $tp"
expect_out_has "--max-num-seqs $best_batch"
run "${acceptance[@]}" --emit sglang
expect_rc 0
expect_out_has "sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct"
expect_out_has "--max-running-requests $best_batch"
run "${acceptance[@]}" --emit trtllm --mode agg
expect_rc 0
expect_out_has "trtllm-serve meta-llama/Llama-3.1-70B-Instruct --backend pytorch"
expect_out_has "free_gpu_memory_fraction: 0.90"
# --emit llamacpp: llama-server workers of the chosen row (planned under llama.cpp's rules: no
# disaggregation, one split at a time), each on its GPUs with every layer offloaded, its slots and
# the whole context; the GGUF file named by its type. What it cannot run is refused by name.
run "${acceptance[@]}" --emit llamacpp --weight-dtype int4 --format json
expect_rc 0
run "${acceptance[@]}" --engine llamacpp --weight-dtype int4 --format json
expect_rc 0
llama_best=$(py 'import json,sys; b=json.load(sys.stdin)["best"]; assert b["mode"] != "disagg", b; print(b["parallel"], b["batch"], b["replicas"])')
read -r llama_parallel llama_batch llama_replicas <<<"$llama_best"
run "${acceptance[@]}" --emit llamacpp --weight-dtype int4
expect_rc 0
expect_out_has "llama-server -m Llama-3.1-70B-Instruct-Q4_K_M.gguf --port 8000"
expect_out_has "-np $llama_batch -c $((llama_batch * 4500))"
expect_out_has "-ngl 999"
expect_out_has "llama-quantize it to Q4_K_M"
[ "$(grep -c '^CUDA_VISIBLE_DEVICES=.* llama-server' <<<"$OUT")" = "$llama_replicas" ] || fail "llama-server workers: $OUT"
llama_tp=${llama_parallel#tp}; llama_tp=${llama_tp%%pp*}; llama_pp=${llama_parallel#*pp}
[ "$llama_tp" = 1 ] || [ "$llama_pp" = 1 ] || fail "llama-server layout with both splits: $llama_parallel"
[ "$llama_tp" = 1 ] || expect_out_has "-sm row"
run "${acceptance[@]}" --emit llamacpp --mode disagg
expect_rc 2
expect_err_has "llama-server has no prefill/decode disaggregation"
run "${acceptance[@]}" --emit llamacpp --weight-dtype fp8
expect_rc 2
expect_err_has "a GGUF file has no FP8 weights"

# plan estimate: the chosen row's configuration priced alone gives that row, every field equal, and
# each step's time split by what it goes to.
run "${acceptance[@]}" --format json
best_json=$OUT
estimate_flags=$(py '
import json, sys
b = json.load(sys.stdin)["best"]
flags = ["--mode", b["mode"], "--tp", b["tp"], "--pp", b["pp"], "--batch", b["batch"]]
if b["mode"] == "agg": flags += ["--ctx-tokens", b["ctx_tokens"]]
if b["mode"] == "disagg": flags += ["--prefill-tp", b["prefill"]["tp"], "--prefill-pp", b["prefill"]["pp"], "--prefill-batch", b["prefill"]["batch"]]
print(" ".join(map(str, flags)))')
# shellcheck disable=SC2086
run plan estimate --model llama-3.1-70b --system h200_sxm --gpus 8 --isl 4000 --osl 500 --ttft 1200 --tpot 20 $estimate_flags --format json
expect_rc 0
BEST="$best_json" py '
import json, os, sys
e = json.load(sys.stdin)
b = json.loads(os.environ["BEST"])["best"]
assert e["configuration"] == b, (e["configuration"], b)
for step in e["steps"]:
    parts = step["parts"]
    assert set(parts) == {"gemm", "attention", "communication", "moe", "memory"}, parts
    assert abs(sum(p["us"] for p in parts.values()) - step["total_us"]) <= 1e-9 * step["total_us"], step
assert e["memory_per_gpu_gib"]["weights"] > 0
' || fail "plan estimate disagrees with plan's row: $OUT"
[ "$(sql "SELECT status FROM runs WHERE command = 'plan estimate' ORDER BY id DESC LIMIT 1")" = "succeeded" ] ||
  fail "plan estimate run not archived as succeeded"
# shellcheck disable=SC2086
run plan estimate --model llama-3.1-70b --system h200_sxm --gpus 8 --isl 4000 --osl 500 --ttft 1200 --tpot 20 $estimate_flags
expect_rc 0
expect_out_has "configuration: "
expect_out_has "gemm_ms"
# A disaggregated unit given by its workers (the AIConfigurator paper's Table 2 deployment): the
# 4 TP1 prefill and 2 TP2 decode workers fill the 8 GPUs, and TensorRT-LLM's default KV cache for
# FP8 weights is FP8 (vLLM keeps BF16).
table2=(plan estimate --model qwen3-32b --system h200_sxm --gpus 8 --isl 4000 --osl 500 --weight-dtype fp8
  --mode disagg --tp 2 --batch 40 --prefill-tp 1 --prefill-workers 4)
run "${table2[@]}" --decode-workers 2 --engine trtllm --format json
expect_rc 0
py '
import json, sys
d = json.load(sys.stdin)
c = d["configuration"]
assert d["precision"]["kv_cache"] == "fp8", d["precision"]
assert (c["prefill"]["workers"], c["decode"]["workers"], c["gpus_per_replica"], c["replicas"]) == (4, 2, 8, 1), c
attention = [s["parts"]["attention"]["sources"] for s in d["steps"]]
assert all(a == "calibrated" for a in attention), attention  # the engine kernels, not optkit-profiled ones
' || fail "plan estimate --prefill-workers/--decode-workers: $OUT"
run "${table2[@]}" --decode-workers 2 --engine vllm --format json
expect_rc 0
py 'import json, sys; d = json.load(sys.stdin); assert d["precision"]["kv_cache"] == "bf16", d["precision"]' ||
  fail "vllm's default KV cache is not bf16: $OUT"
run "${table2[@]}" --engine trtllm --decode-workers 3
expect_rc 2
expect_err_has "--prefill-workers 4 --decode-workers 3: the unit needs 10 GPUs, more than --gpus 8"
run plan estimate --model qwen3-32b --system h200_sxm --gpus 8 --mode agg --tp 2 --decode-workers 2
expect_rc 2
expect_err_has "only disaggregated serving (--mode disagg) has pools"

# plan calibrate: every set's error, the serving figures' included, and the fitted block.
run plan calibrate --format json
expect_rc 0
py '
import json, sys
d = json.load(sys.stdin)
sets = {s["name"]: s for s in d["sets"]}
assert set(sets) == {"trtllm-0.6-static", "aiconfigurator-2026-table2", "trtllm-1.0-throughput"}, sets
assert all(s["mape_after"] < s["mape_before"] and s["mape_plan"] > 0 for s in sets.values()), sets
assert {r["mode"] for r in d["rows"]} == {"static", "agg", "disagg", "throughput"}
assert "decode_attention" in d["after"]["efficiency"], d["after"]
' || fail "plan calibrate: $OUT"

run plan estimate --model llama-3.1-70b --system h200_sxm --gpus 8 --tp 3
expect_rc 2
expect_err_has "--tp 3" # named with the layouts plan searches
expect_err_has "not a worker layout plan searches"
run plan estimate --model llama-3.1-70b --system h200_sxm --gpus 8 --tp 2 --batch 4000
expect_rc 2
expect_err_has "--batch 4000"

# --slo: percentile SLAs under Poisson arrivals. The rows meeting the mean bounds are simulated; at
# --rate 1.5 some of them (a small decode batch) queue past the p95 bound and are dropped, though
# their means hold. The best meets both SLOs at that rate and serves the most tokens/s/GPU at the
# highest rate where they hold.
slo=(plan --model llama-3.1-70b --system h200_sxm --gpus 8 --isl 4000 --osl 500 --slo 'e2e:p95<=12s' --slo 'ttft:p95<=1500ms'
  --slo-requests 400)
run "${slo[@]}" --rate 1.5 --format json
expect_rc 0
py '
import json, sys
d = json.load(sys.stdin)
tail = d["percentile_sla"]
assert tail["slos"] == ["e2e:p95<=12s", "ttft:p95<=1500ms"] and tail["rate"] == 1.5 and tail["arrivals"] == "poisson"
rows = tail["rows"]
assert 1 < len(rows) <= 32, len(rows)
for r in rows:  # every simulated row met the mean bounds
    c = r["configuration"]
    assert c["ttft_ms"] <= 1500 and c["request_latency_ms"] <= 12000, c
dropped = [r for r in rows if not r["at_rate"]["meets"]]
assert dropped, "no row dropped by queueing"
assert all(not r["meets"] and any("p95" in m for m in r["at_rate"]["misses"]) for r in dropped)
best = rows[0]
assert best["meets"] and best["at_rate"]["meets"] and best["capacity"]["e2e_ms"]["p95"] <= 12000
assert best["capacity"]["requests_per_s"] >= 1.5
assert d["best"]["configuration"] == best["configuration"]["configuration"], (d["best"], best)
assert all(r["tokens_per_s_per_gpu"] <= best["tokens_per_s_per_gpu"] for r in rows if r["meets"])
' || fail "plan --slo JSON: $OUT"
run "${slo[@]}" --rate 1.5
expect_rc 0
expect_out_has "percentile SLA --slo e2e:p95<=12s, ttft:p95<=1500ms"
expect_out_has "e2e_p95"
run plan --model llama-3.1-70b --system h200_sxm --gpus 8 --isl 4000 --osl 500 --slo 'e2e:p95<=12s' --rate 40 \
  --slo-requests 400
expect_rc 1
expect_err_has "no configuration meets --slo e2e:p95<=12s under Poisson arrivals"
run "${slo[@]}" --target-rate 3
expect_rc 2
expect_err_has "give the rate to check as --rate"
run plan --model llama-3.1-70b --system h200_sxm --slo 'itl:p95<=20ms'
expect_rc 2
expect_err_has "use tpot"
run "${slo[@]}" --rate 0
expect_rc 2
expect_err_has "--rate must be a finite number above 0"

# An SLA nothing meets: exit 1, naming the closest configuration and the missed term.
run plan --model llama-3.1-70b --system h200_sxm --gpus 8 --isl 4000 --osl 500 --ttft 1 --tpot 20
expect_rc 1
expect_err_has "no configuration meets TTFT <= 1 ms"
expect_err_has "closest: "
expect_err_has "misses --ttft 1"
[ "$(sql "SELECT status FROM runs ORDER BY id DESC LIMIT 1")" = "goal_not_met" ] || fail "unmet SLA not archived as goal_not_met"

# An SLA that is not a finite number is refused by name (inf once read as "no limit").
for sla in "--ttft inf" "--tpot nan" "--e2e inf" "--speed inf"; do
  run plan --model llama-3.1-70b --system h200_sxm --gpus 8 $sla
  expect_rc 2
  expect_err_has "${sla% *} must be a finite number above 0"
done

# A request-latency budget (--e2e): the best row's TTFT + 499·TPOT fits it, with no TPOT default;
# a budget nothing meets names the missed term.
run plan --model llama-3.1-70b --system h200_sxm --gpus 8 --isl 4000 --osl 500 --ttft 1200 --e2e 15000 --format json
expect_rc 0
python3 - "$OUT" <<'PY' || fail "plan --e2e: $OUT"
import json, sys
d = json.loads(sys.argv[1])
b = d["best"]
assert d["sla"]["e2e_ms"] == 15000 and abs(d["sla"]["tpot_ms"] - 15000 / 499) < 1e-9, d["sla"]
assert abs(b["request_latency_ms"] - (b["ttft_ms"] + 499 * b["tpot_ms"])) < 1e-6 * b["request_latency_ms"], b
assert b["request_latency_ms"] <= 15000 and b["ttft_ms"] <= 1200, b
PY
run plan --model llama-3.1-70b --system h200_sxm --gpus 8 --isl 4000 --osl 500 --ttft 1200 --e2e 15000 \
  --bench-profile "$SCRATCH/e2e-profile.yaml"
expect_rc 0
grep -qF '"e2e:mean<=15000ms"' "$SCRATCH/e2e-profile.yaml" || fail "bench profile lacks the e2e SLO: $(cat "$SCRATCH/e2e-profile.yaml")"
run plan --model llama-3.1-70b --system h200_sxm --gpus 8 --isl 4000 --osl 500 --e2e 100
expect_rc 1
expect_err_has "misses --e2e 100"
run plan --model llama-3.1-70b --system h200_sxm --e2e 0
expect_rc 2
expect_err_has "--e2e must be a finite number above 0"

# Memory: 70B in bf16 cannot fit one 80 GB GPU — nothing is recommended.
run plan --model llama-3.1-70b --system h100_sxm --gpus 1 --isl 1000 --osl 100
expect_rc 1
expect_err_has "no configuration of llama-3.1-70b fits 1 x h100_sxm"
run plan --model llama-3.1-70b --system h100_sxm --gpus 2 --isl 1000 --osl 100 --mode static,agg,disagg --format csv
expect_rc 0
python3 -c '
import csv, sys
rows = list(csv.DictReader(sys.stdin))
assert rows and all(float(r["mem_gib"]) <= 79.6 for r in rows), rows
assert all(r["gpus"] == "2" for r in rows), rows
' <<<"$OUT" || fail "memory-infeasible rows in the plan: $OUT"

# --target-rate: the fewest GPUs that sustain the rate.
run plan --model llama-3.1-8b --system h100_sxm --gpus 8 --isl 2000 --osl 200 --target-rate 40 --format json
expect_rc 0
py '
import json, math, sys
t = json.load(sys.stdin)["target_rate"]
c = t["configuration"]
assert t["gpus"] == t["replicas"] * c["gpus_per_replica"], t
assert t["replicas"] * c["requests_per_s"] / c["replicas"] >= 40, t
' || fail "target rate: $OUT"

# A config.json folder, MoE routing skew, speculative decoding, fp8, and the SVG plot.
mkdir -p "$SCRATCH/qwen"
cat >"$SCRATCH/qwen/config.json" <<'JSON'
{"architectures":["Qwen3MoeForCausalLM"],"num_hidden_layers":48,"hidden_size":2048,"num_attention_heads":32,
 "num_key_value_heads":4,"head_dim":128,"intermediate_size":6144,"num_experts":128,"num_experts_per_tok":8,
 "moe_intermediate_size":768,"vocab_size":151936,"max_position_embeddings":40960}
JSON
run plan --model "$SCRATCH/qwen" --system h100_sxm --gpus 4 --isl 2000 --osl 300 --weight-dtype fp8 --kv-dtype fp8 \
  --spec-tokens 3 --moe-alpha 1.2 --plot "$SCRATCH/pareto.svg" --bench-profile "$SCRATCH/profile.yaml"
expect_rc 0
expect_out_has "best: "
grep -q "<svg" "$SCRATCH/pareto.svg" || fail "no SVG written"
grep -q "tokens/s/GPU" "$SCRATCH/pareto.svg" || fail "SVG lacks its axis"
grep -q "input_tokens: {distribution: fixed, mean: 2000}" "$SCRATCH/profile.yaml" || fail "bench profile lacks the workload"
# optkit bench accepts it as a serving profile: it gets as far as the (absent) server, exit 3.
run bench --endpoint http://127.0.0.1:1 --profile "$SCRATCH/profile.yaml"
expect_rc 3
expect_err_has "127.0.0.1:1"
[ "$(sql "SELECT COUNT(*) FROM artifacts WHERE kind = 'plot'")" = "1" ] || fail "plot not archived"

# A perf database: measured points are used and labelled.
mkdir -p "$SCRATCH/db"
printf 'kind,m,n,k,latency_us\nbf16,1,6144,4096,30\nbf16,512,6144,4096,90\n' >"$SCRATCH/db/gemm.csv"
run plan --model llama-3.1-8b --system h100_sxm --gpus 1 --isl 1000 --osl 100 --perf-db "$SCRATCH/db" --format json
expect_rc 0
py '
import json, sys
d = json.load(sys.stdin)
assert d["perf_database"]["points"] == 2, d["perf_database"]
assert any("calibrated" in r["sources"] and "+" in r["sources"] for r in d["pareto"]), d["pareto"][:2]
' || fail "perf db labels: $OUT"
printf 'kind,m,n,k,latency_us\nbf16,1,6144,4096,-3\n' >"$SCRATCH/db/gemm.csv"
run plan --model llama-3.1-8b --system h100_sxm --gpus 1 --perf-db "$SCRATCH/db"
expect_rc 2
expect_err_has "$SCRATCH/db/gemm.csv:2: latency_us \"-3\" is not a positive number"

# Bad input: exit 2 naming the value and what exists.
run plan --model lama-3.1-70b --system h200_sxm
expect_rc 2
expect_err_has "did you mean llama-3.1-70b"
expect_err_has "presets: llama-3.1-8b"
run plan --model llama-3.1-8b --system h300
expect_rc 2
expect_err_has "--system h300: unknown system"
expect_err_has "systems: a100_40g, a100_80g, a10g, b200, h100_sxm, h200_sxm, l4, l40s, t4, v100"
run plan --model llama-3.1-8b --system h100_sxm --weight-dtype fp4
expect_rc 2
expect_err_has "--weight-dtype fp4: unknown number format"
run plan --model llama-3.1-8b --system h100_sxm --isl 200000
expect_rc 2
expect_err_has "exceeds llama-3.1-8b's context of 131072 tokens"
run plan --model llama-3.1-8b --system h100_sxm --mode fast
expect_rc 2
expect_err_has "--mode fast: unknown serving mode"
run plan --model llama-3.1-8b --system h100_sxm --tpot 20 --speed 50
expect_rc 2
expect_err_has "--speed and --tpot"
echo '{"architectures":["BertModel"]}' >"$SCRATCH/config.json"
run plan --model "$SCRATCH/config.json" --system h100_sxm
expect_rc 2
expect_err_has "architecture BertModel is not supported by optkit plan; supported: LlamaForCausalLM"
mkdir -p "$SCRATCH/data/profiles/systems" "$SCRATCH/data/recipes"
sed 's/memory_gib: 79.6/memory_gb: 79.6/' "$OPTKIT_SOURCE_DIR/profiles/systems/h100_sxm.yaml" \
  >"$SCRATCH/data/profiles/systems/h100_sxm.yaml"
OPTKIT_DATA_DIR="$SCRATCH/data" run plan --model llama-3.1-8b --system h100_sxm
expect_rc 2
expect_err_has "h100_sxm.yaml:6:3"
expect_err_has "memory_gib"
echo "plan CLI tests passed"
