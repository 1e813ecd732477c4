# Shared helpers for the black-box CLI tests. Each test script sources this file, runs the
# binary in $OPTKIT against a scratch archive, and fails on the first broken expectation.
set -u
: "${OPTKIT:?set OPTKIT to the optkit binary}"

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/optkit-cli-XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
export OPTKIT_ARCHIVE="$SCRATCH/archive.db"
export HOME="$SCRATCH/home" # no user config file leaks in
unset OPTKIT_CONFIG XDG_CONFIG_HOME XDG_DATA_HOME

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# run CMD...: runs optkit, capturing stdout in $OUT, stderr in $ERR and the exit code in $RC.
run() {
  OUT=$("$OPTKIT" "$@" 2>"$SCRATCH/stderr")
  RC=$?
  ERR=$(cat "$SCRATCH/stderr")
}

expect_rc() {
  [ "$RC" -eq "$1" ] || fail "expected exit $1, got $RC; stdout: $OUT; stderr: $ERR"
}

expect_out_has() {
  grep -qF -- "$1" <<<"$OUT" || fail "stdout lacks '$1': $OUT"
}

expect_err_has() {
  grep -qF -- "$1" <<<"$ERR" || fail "stderr lacks '$1': $ERR"
}

expect_eq() {
  [ "$1" = "$2" ] || fail "expected '$2', got '$1'"
}

# sql QUERY: asks the archive through the sqlite3 shell, an independent reader.
sql() {
  sqlite3 -batch -noheader "$OPTKIT_ARCHIVE" "$1"
}
