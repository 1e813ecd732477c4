# Help, version, exit codes and one-line errors.
. "$(dirname "$0")/lib.sh"

run --help
expect_rc 0
expect_out_has "runs"
expect_out_has "doctor"
expect_out_has "--archive"
grep -q "internal-test" <<<"$OUT" && fail "the hidden test command shows in --help"

run --version
expect_rc 0
expect_out_has "optkit 0.1.0"
expect_out_has "features: CUDA"
expect_out_has "BLAS OpenBLAS"

run --archive "$SCRATCH/x.db" runs list --format json
expect_rc 0
expect_eq "$OUT" "[]"

run runs list --format csv
expect_rc 0
expect_eq "$OUT" "id,command,status,exit_code,started_at,duration_s,host,version"

# Every subcommand answers --help.
for cmd in "doctor" "runs" "runs list" "runs show" "runs export" "runs compare" "runs rm"; do
  run $cmd --help
  expect_rc 0
  expect_out_has "Usage"
done

# Usage errors: exit 2, one line on stderr naming the problem.
run frobnicate
expect_rc 2
expect_err_has "frobnicate"
[ "$(wc -l <<<"$ERR")" -eq 1 ] || fail "expected a one-line error, got: $ERR"

run runs list --format xml
expect_rc 2
expect_err_has "--format"

run runs list --since yesterday
expect_rc 2
expect_err_has "--since yesterday"

run runs show 12345
expect_rc 2
expect_err_has "run 12345 is not in archive"

run runs show banana
expect_rc 2
expect_err_has "expected a run id"

# A number out of its range is named in a few characters, not with DBL_MAX's 309 digits.
run runs list --limit -3
expect_rc 2
expect_err_has "-3 is not a finite number > 0"
[ "${#ERR}" -lt 200 ] || fail "range error too long (${#ERR} chars): $ERR"
run runs list --limit 1e400
expect_rc 2
expect_err_has "1e400"
[ "${#ERR}" -lt 200 ] || fail "range error too long (${#ERR} chars): $ERR"
run serve-deltas --base "$OPTKIT_SOURCE_DIR/testdata/models/tiny-base" --adapter-load-timeout 0
expect_rc 2
expect_err_has "--adapter-load-timeout"

run
expect_rc 2
expect_out_has "Usage"

# JSON logs keep stderr machine-readable.
run --log-format json runs show 999
expect_rc 2
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["level"]=="error" and "999" in d["msg"]' "$ERR" \
  || fail "not a JSON log line: $ERR"

# ... and only when asked: a JSON result format leaves the logs as text.
run runs list --format json --bogus
expect_rc 2
expect_err_has "optkit: error: The following argument was not expected: --bogus"
run --log-format=json runs list --bogus
expect_rc 2
expect_err_has '"level":"error"'

# An archive that is not an optkit archive is refused, and not touched.
sqlite3 "$SCRATCH/other.db" "CREATE TABLE t(x); INSERT INTO t VALUES (1);"
run --archive "$SCRATCH/other.db" runs list
expect_rc 2
expect_err_has "not an optkit archive"
expect_eq "$(sqlite3 "$SCRATCH/other.db" 'SELECT count(*) FROM t')" "1"

echo "ok"
