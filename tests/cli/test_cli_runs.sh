# Recording runs and reading them back: doctor, show, export, compare, filters, rm; failures are
# recorded too.
. "$(dirname "$0")/lib.sh"

run -q doctor
expect_rc 0
expect_out_has "worker"
expect_out_has "blas"
run doctor --format json
expect_rc 0
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["run_id"]==2 and any(c["check"]=="archive" for c in d["checks"])' "$OUT" \
  || fail "doctor --format json: $OUT"

expect_eq "$(sql "SELECT count(*) FROM runs WHERE command='doctor' AND status='succeeded' AND exit_code=0")" "2"
expect_eq "$(sql "SELECT count(*) FROM trials WHERE status='succeeded'")" "2"
expect_eq "$(sql "SELECT count(*) FROM artifacts WHERE kind='log'")" "2"
expect_eq "$(sql "SELECT count(DISTINCT name) FROM metrics WHERE run_id=1 AND name IN ('worker_roundtrip','blas_sgemm_gflops','cuda_devices')")" "3"

# A failing worker run is recorded failed, with exit code 3 and the reason.
printf '[{"payload": {"task": "exit", "code": 7}}]' >"$SCRATCH/tasks.json"
run -q internal-test --tasks "$SCRATCH/tasks.json"
expect_rc 3
expect_err_has "1 of 1 worker task(s) failed"
expect_eq "$(sql "SELECT status || ' ' || exit_code FROM runs WHERE id=3")" "failed 3"
expect_eq "$(sql "SELECT exit_code FROM trials WHERE run_id=3")" "7"
# The command line and resolved config are archived.
sql "SELECT argv FROM runs WHERE id=3" | grep -qF '"--tasks"' || fail "argv not archived"
sql "SELECT config FROM runs WHERE id=3" | grep -qF '"archive_origin":"OPTKIT_ARCHIVE"' || fail "config not archived"

run runs list --format json
expect_rc 0
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert [r["id"] for r in d]==[3,2,1], d' "$OUT" || fail "list order"
run runs list --status failed --format csv
expect_eq "$(tail -n +2 <<<"$OUT" | cut -d, -f1,2,3)" "3,internal-test,failed"
run runs list --command doctor --since 1h --limit 1 --format csv
expect_eq "$(tail -n +2 <<<"$OUT" | cut -d, -f1)" "2"
run runs list --since 2000-01-01 --format json
expect_eq "$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])))' "$OUT")" "3"

run runs show last
expect_rc 0
expect_out_has "run 3: internal-test"
expect_out_has "exit 7"

run runs export 1 --format json -o "$SCRATCH/run1.json"
expect_rc 0
python3 - "$SCRATCH/run1.json" <<'PY' || fail "export json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["id"] == 1 and d["command"] == "doctor" and d["status"] == "succeeded"
assert len(d["trials"]) == 1 and len(d["artifacts"]) == 1 and len(d["artifacts"][0]["sha256"]) == 64
assert {m["name"] for m in d["metrics"]} >= {"worker_roundtrip", "blas_sgemm_gflops"}
PY
# The artifact digest is what sha256sum says about the log file.
path=$(sql "SELECT path FROM artifacts WHERE run_id=1")
expect_eq "$(sql "SELECT sha256 FROM artifacts WHERE run_id=1")" "$(sha256sum "$path" | cut -d' ' -f1)"

run runs export 1 --format csv
expect_rc 0
python3 -c '
import csv, io, sys
rows = list(csv.DictReader(io.StringIO(sys.argv[1])))
assert rows and all(r["run_id"] == "1" for r in rows), rows
assert any(r["name"] == "blas_sgemm_gflops" and float(r["value"]) > 0 for r in rows)' "$OUT" || fail "export csv: $OUT"

run runs compare 1 2 --format json
expect_rc 0
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert any(r["item"]=="metric.blas_sgemm_gflops" for r in d)' "$OUT" \
  || fail "compare: $OUT"
run runs compare 1
expect_rc 2

run_dir="$SCRATCH/archive-runs/1"
[ -d "$run_dir" ] || fail "no run directory at $run_dir"
run runs rm 1 999
expect_rc 2 # one bad id: nothing is removed
expect_eq "$(sql "SELECT count(*) FROM runs")" "3"
run runs rm 1
expect_rc 0
expect_out_has "removed run 1"
expect_eq "$(sql "SELECT count(*) FROM runs")" "2"
expect_eq "$(sql "SELECT count(*) FROM trials WHERE run_id=1")" "0"
[ -d "$run_dir" ] && fail "run directory of a removed run remains"
expect_eq "$(sql "PRAGMA integrity_check")" "ok"

echo "ok"
