# optkit tune on the simulator: a TPE study exits 0 with the best configuration and archives
# every trial; SLO-Tuner's hill-climb leaves the paper's start (speculation on, p99 over the SLO)
# for a configuration that meets it; a study killed with SIGKILL is resumed with --resume and
# ends with the same trials as an uninterrupted one, none measured twice; an SLO nothing meets
# is exit 1; bad input is exit 2 naming the file or flag. No assertion is about speed.
. "$(dirname "$0")/lib.sh"

run tune --engine sim --space sim-serving --optimizer tpe --trials 30 --seed 1 --format json --svg "$SCRATCH/plots" \
  --emit "$SCRATCH/launch.sh"
expect_rc 0
python3 - "$OUT" <<'PY' || fail "tune JSON: $OUT"
import json, sys
d = json.loads(sys.argv[1])
assert d["status"] == "FEASIBLE", d["status"]
search = [t for t in d["trials"] if t["phase"] in ("baseline", "search")]
assert len(search) == 30, len(search)
assert d["trials"][0]["phase"] == "baseline"
assert d["best"]["config"]["batching"] in ("continuous", "static")
best = d["best"]["median_value"]
assert all(t["outcome"]["feasible"] or t["outcome"]["value"] is None or t["outcome"]["value"] <= best + 1e9 for t in d["trials"])
# the winner was re-measured and met the SLO every time
assert len(d["best"]["values"]) >= 2
# the Pareto frontier: no member beaten on both throughput and p99 by any measured trial
front = d["pareto_frontier"]
assert front
measured = [t["outcome"]["metrics"] for t in d["trials"] if t["outcome"]["status"] == "measured"]
for f in front:
    assert not any(m["throughput"] >= f["throughput"] and m["p99_s"] <= f["p99_s"] and
                   (m["throughput"] > f["throughput"] or m["p99_s"] < f["p99_s"]) for m in measured), f
PY
run_id=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["run_id"])' "$OUT")
expect_eq "$(sql "SELECT COUNT(*) FROM trials WHERE run_id=$run_id AND json_extract(params,'\$.phase') IN ('baseline','search')")" 30
[ "$(sql "SELECT COUNT(*) FROM metrics WHERE run_id=$run_id AND name='p99_s'")" -ge 30 ] || fail "p99 metrics not archived"
expect_eq "$(sql "SELECT status FROM runs WHERE id=$run_id")" succeeded
for svg in trajectory pareto; do
  python3 -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); assert r.tag.endswith("svg")' \
    "$SCRATCH/plots/$svg.svg" || fail "$svg.svg is not SVG"
done
grep -q "batching=" "$SCRATCH/launch.sh" || fail "--emit wrote no launch command"

# SLO-Tuner's controller from its K0 (concurrency 8, max_num_seqs 8, width 8, speculation on).
run tune --space slo-tuner --optimizer hillclimb --trials 24 --seed 3 --format json
expect_rc 0
python3 - "$OUT" <<'PY' || fail "hill-climb: $OUT"
import json, sys
d = json.loads(sys.argv[1])
first = d["trials"][0]
assert first["config"] == {"concurrency": 8, "max_num_seqs": 8, "speculation": "on", "speculative_tokens": 8}, first
assert not first["outcome"]["feasible"], "K0 should miss the 1.2 s p99 SLO on this setup"
best = d["best"]
assert best["median_value"] > first["outcome"]["value"]
PY

# Kill -9 mid-study, then resume: same trials as the uninterrupted study, none measured twice.
cat >"$SCRATCH/slow.yaml" <<'YAML'
name: slow
timing: {step_base_ms: 4, prefill_token_us: 20, decode_seq_us: 150, noise_cv: 0.05}
workload: {arrivals: poisson, rate: 6, prompt_mean: 256, output_mean: 64}
segment: {warmup_s: 10, min_duration_s: 60, min_completions: 150000, slo_s: 1.2}
YAML
study=(tune --space sim-serving --sim "$SCRATCH/slow.yaml" --optimizer tpe --trials 14 --seed 5 --top-k 1 --replicates 1
  --format json)
before=$(sql "SELECT COALESCE(MAX(id), 0) FROM runs")
"$OPTKIT" "${study[@]}" >"$SCRATCH/killed.out" 2>"$SCRATCH/killed.err" &
victim=$!
killed_run=""
for _ in $(seq 1 6000); do
  killed_run=$(sql "SELECT COALESCE(MAX(id), 0) FROM runs WHERE command='tune' AND id > $before")
  if [ "$killed_run" -gt 0 ]; then
    done_trials=$(sql "SELECT COUNT(*) FROM trials WHERE run_id=$killed_run AND result IS NOT NULL AND json_extract(params,'\$.phase')='search'")
    [ "${done_trials:-0}" -ge 4 ] && break
  fi
  kill -0 "$victim" 2>/dev/null || break
  sleep 0.05
done
kill -KILL "$victim" 2>/dev/null
wait "$victim" 2>/dev/null
completed=$(sql "SELECT COUNT(*) FROM trials WHERE run_id=$killed_run AND result IS NOT NULL")
[ "$completed" -ge 4 ] || fail "the study did not get 4 trials in before the kill ($completed)"
[ "$completed" -lt 15 ] || fail "the study finished before it could be killed; make its trials longer"
expect_eq "$(sql "SELECT status FROM runs WHERE id=$killed_run")" running

run --quiet tune --resume "$killed_run" --format json
expect_rc 0
resumed_out=$OUT
resumed_run=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["run_id"])' "$OUT")
run --quiet "${study[@]}"
expect_rc 0
python3 - "$resumed_out" "$OUT" "$completed" <<'PY' || fail "resume differs from the uninterrupted study"
import json, sys
resumed, full, completed = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
assert resumed["resumed_from"] > 0
r = [(t["number"], t["phase"], t["config"]) for t in resumed["trials"]]
f = [(t["number"], t["phase"], t["config"]) for t in full["trials"]]
assert r == f, (r, f)
assert [t["outcome"]["value"] for t in resumed["trials"]] == [t["outcome"]["value"] for t in full["trials"]]
taken = [t for t in resumed["trials"] if t["resumed"]]
assert len(taken) == completed, (len(taken), completed)
numbers = [(t["number"], t["phase"]) for t in resumed["trials"]]
assert len(numbers) == len(set(numbers)), "a trial was measured twice"
assert resumed["best"]["config"] == full["best"]["config"]
PY
expect_eq "$(sql "SELECT COUNT(*) FROM trials WHERE run_id=$resumed_run AND json_extract(params,'\$.resumed_from')=$killed_run")" "$completed"

# --prior: a simulated study's best configurations are measured first, right after the baseline.
run tune --space slo-tuner --optimizer tpe --trials 6 --prior tinyllama-l40s --prior-trials 40 --prior-top 2 \
  --top-k 0 --format json
expect_rc 0
prior_run=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["run_id"])' "$OUT")
prior=$(sql "SELECT data FROM events WHERE run_id=$prior_run AND kind='tune.prior'")
python3 - "$OUT" "$prior" <<'PY' || fail "--prior: $OUT / $prior"
import json, sys
d, prior = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert len(prior) == 2
assert [t["config"] for t in d["trials"][1:3]] == prior, (d["trials"][1:3], prior)
PY

# runs compare between two studies: their differing options and best values side by side.
run runs compare "$run_id" "$prior_run" --format json
expect_rc 0
python3 - "$OUT" "$run_id" "$prior_run" <<'PY' || fail "runs compare: $OUT"
import json, sys
rows, a, b = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
by_item = {r["item"]: r for r in rows}
assert by_item["command"][f"run {a}"] == by_item["command"][f"run {b}"] == "tune"
best = by_item["metric.best_value"]
assert best[f"run {a}"] > 0 and best[f"run {b}"] > 0, best
assert by_item["config.options.--space"][f"run {a}"] == "sim-serving", by_item["config.options.--space"]
PY
run tune --space slo-tuner --optimizer hillclimb --prior tinyllama-l40s
expect_rc 2
expect_err_has "--prior warm-starts tpe or random"

# Nothing meets a 10 ms p99: exit 1, the run archived as goal_not_met.
run tune --space slo-tuner --optimizer random --trials 4 --slo-seconds 0.01 --top-k 1 --replicates 1
expect_rc 1
expect_err_has "INFEASIBLE"
expect_eq "$(sql "SELECT status FROM runs WHERE id=(SELECT MAX(id) FROM runs)")" goal_not_met

# Certified objective: bench's Algorithm 1 against the simulator.
run tune --space slo-tuner --optimizer random --trials 3 --objective certified --slo 'e2e:p99<=1.2s' --top-k 1 \
  --replicates 1 --format json
expect_rc 0
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["best"]["median_value"] > 0; assert "certified_rate" in d["trials"][0]["outcome"]["metrics"]' "$OUT" ||
  fail "certified objective: $OUT"

# Bad input: exit 2 naming the file, knob or flag.
printf 'name: bad\nparameters:\n  - {name: threads, type: int, low: 1, high: 4}\n' >"$SCRATCH/bad.yaml"
run tune --space "$SCRATCH/bad.yaml" --trials 2
expect_rc 2
expect_err_has "bad.yaml: knob 'threads' is not one the simulator has"
printf 'name: bad\nparameters:\n  - {name: max_num_seqs, type: integer, low: 1, high: 4}\n' >"$SCRATCH/typo.yaml"
run tune --space "$SCRATCH/typo.yaml"
expect_rc 2
expect_err_has "typo.yaml:3:"
run tune --space no-such-space
expect_rc 2
expect_err_has "--space"
run tune --space sim-serving --objective certified
expect_rc 2
expect_err_has "--slo"
run tune --resume 999999
expect_rc 2
run tune --space sim-serving --optimizer tpe --trials 2 --hw-cost max_num_seqs
expect_rc 2
expect_err_has "--hw-cost 'max_num_seqs' must read knob=number"
echo "test_cli_tune: ok"
