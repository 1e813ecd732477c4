# optkit tune --engine optkit: every trial launches serve-deltas (the mock model behind the real
# engine and HTTP path) with the trial's knobs from the engine adapter, measures it with bench and
# stops it. The launch records carry the knob flags and the settings the engine reports back,
# no engine outlives the study, a configuration the adapter refuses never launches, and an engine
# that cannot start is a launch_failed trial. Assertions are about structure, never about speed.
. "$(dirname "$0")/lib.sh"

base="$OPTKIT_SOURCE_DIR/testdata/models/tiny-base"
cat >"$SCRATCH/space.yaml" <<'YAML'
name: live-test
parameters:
  - {name: max_num_seqs, type: int, low: 1, high: 16, log: true, default: 4}
  - {name: max_num_batched_tokens, type: int, low: 2, high: 256, log: true, default: 64}
  - {name: concurrency, type: int, low: 1, high: 4, default: 2}
YAML
live=(tune --engine optkit --model "$base" --engine-arg=--mock --engine-arg=--mock-step-ms=1 --engine-arg=--threads=1
  --space "$SCRATCH/space.yaml" --goodput-requests 24 --slo-seconds 5 --max-dispatch-lag-ms 1000)

run "${live[@]}" --optimizer random --trials 4 --seed 3 --top-k 1 --replicates 1 --format json
expect_rc 0
python3 - "$OUT" <<'PY' || fail "live study: $OUT"
import json, sys
d = json.loads(sys.argv[1])
assert d["status"] == "FEASIBLE", d
measured = [t for t in d["trials"] if t["outcome"]["status"] == "measured"]
assert measured, d["trials"]
for t in measured:
    argv = t["outcome"]["engine"]["argv"]
    assert "serve-deltas" in argv and "--mock" in argv, argv
    seqs = argv[argv.index("--max-num-seqs") + 1]
    assert int(seqs) == t["config"]["max_num_seqs"], (argv, t["config"])
    effective = t["outcome"]["engine"]["effective"]  # read back from the engine, not assumed
    assert effective["max_num_seqs"] == t["config"]["max_num_seqs"], (effective, t["config"])
    assert effective["max_num_batched_tokens"] == t["config"]["max_num_batched_tokens"], effective
    assert effective["kv_cache_blocks"] > 0 and effective["mock"] is True, effective
    assert t["outcome"]["metrics"]["goodput"] > 0
for t in d["trials"]:
    c = t["config"]
    if c["max_num_batched_tokens"] < c["max_num_seqs"]:
        assert t["outcome"]["status"] == "invalid", t   # the adapter's rule, checked before launch
assert d["best"]["launch"].startswith("optkit serve-deltas")
PY
# (--mock-step-ms=1 is this test's engine argument: servers of other tests running beside it do not match)
pgrep -f "serve-deltas --base $base.*--mock-step-ms=1" >/dev/null && fail "an engine outlived its trial"
run_id=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["run_id"])' "$OUT")
[ "$(sql "SELECT COUNT(*) FROM artifacts WHERE run_id=$run_id AND kind='engine-log'")" -ge 1 ] ||
  fail "engine logs not archived"

# The certified objective: bench's Algorithm 1 per trial.
run "${live[@]}" --objective certified --slo 'e2e:p95<=2s' --optimizer random --trials 2 --top-k 0 \
  --bench-min-trial-seconds 1 --bench-max-trials 2 --beta-tolerance 0.5 --format json
expect_rc 0
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["best"]["median_value"] > 0, d' "$OUT" ||
  fail "certified live study: $OUT"

# An engine that cannot start: every trial launch_failed, the study INFEASIBLE (exit 1), not a crash.
run "${live[@]}" --engine-executable /bin/false --optimizer random --trials 2 --top-k 0 --format json
expect_rc 1
python3 -c 'import json,sys; s=[t["outcome"]["status"] for t in json.loads(sys.argv[1])["trials"]]; assert set(s) <= {"launch_failed","invalid"} and "launch_failed" in s, s' "$OUT" ||
  fail "launch failures: $OUT"

# A knob the engine does not have: exit 2 naming it.
printf 'name: x\nparameters:\n  - {name: memory_fraction, type: float, low: 0.5, high: 0.9}\n' >"$SCRATCH/gpu.yaml"
run tune --engine optkit --model "$base" --space "$SCRATCH/gpu.yaml"
expect_rc 2
expect_err_has "knob 'memory_fraction' is not one engine optkit has"
run tune --engine vllm --space "$SCRATCH/gpu.yaml"
expect_rc 2
expect_err_has "--model"
echo "test_cli_tune_live: ok"
