# optkit tune calibrate-sim: bench a serve-deltas whose every engine step lasts 5 ms by
# construction (--mock --mock-step-ms 5), fit the simulator to that bench run, and recover the
# step cost; the setup it writes runs as a tune --sim file. The bound is wide (4–8 ms) because a
# busy machine wakes the engine late; the test is about the fit finding the engine's step, not
# about speed.
. "$(dirname "$0")/lib.sh"

base="$OPTKIT_SOURCE_DIR/testdata/models/tiny-base"
server=""
trap '[ -n "$server" ] && kill -KILL "$server" 2>/dev/null; rm -rf "$SCRATCH"' EXIT
SERVE_ARCHIVE="$SCRATCH/server.db" start_serve_deltas "$base" --mock --mock-step-ms 5 --max-num-seqs 8

run --quiet bench --endpoint "http://127.0.0.1:$port" --profile chat-small --slo 'e2e:p95<=3s' --min-trial-seconds 1 \
  --min-requests 30 --gate-requests 10 --max-trials 3 --beta-tolerance 0.5 --max-dispatch-lag-ms 1000 --no-calibration
expect_rc 0
run tune calibrate-sim last --max-num-seqs 8 -o "$SCRATCH/fitted.yaml" --format json
expect_rc 0
python3 - "$OUT" <<'PY' || fail "calibration: $OUT"
import json, sys
d = json.loads(sys.argv[1])
step = d["timing"]["step_base_ms"]
assert 4.0 <= step <= 8.0, f"fitted step {step} ms, the engine's is 5 ms"
assert d["rms_log_error"] < 0.5, d["rms_log_error"]
assert len(d["trials"]) >= 2
PY
expect_eq "$(sql "SELECT COUNT(*) FROM metrics WHERE name='fit_rms_log_error'")" 1
run tune --space slo-tuner --sim "$SCRATCH/fitted.yaml" --optimizer random --trials 3 --top-k 0 --format json
[ "$RC" -eq 0 ] || [ "$RC" -eq 1 ] || fail "the fitted setup does not run: $ERR"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["engine"].startswith("sim calibrated-run-"), d["engine"]' "$OUT" ||
  fail "tune did not use the fitted setup: $OUT"

run tune calibrate-sim 999999
expect_rc 2
run tune calibrate-sim last --max-num-seqs 0
expect_rc 2
echo "test_cli_tune_calibrate: ok"
