# Shared helpers for the black-box CLI tests. Each test script sources this file, runs the
# binary in $OPTKIT against a scratch archive, and fails on the first broken expectation.
set -u
: "${OPTKIT:?set OPTKIT to the optkit binary}"

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/optkit-cli-XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
export OPTKIT_ARCHIVE="$SCRATCH/archive.db"
export HOME="$SCRATCH/home" # no user config file leaks in
unset OPTKIT_CONFIG XDG_CONFIG_HOME XDG_DATA_HOME

# sanitizer_build: true when $OPTKIT is the ASan+UBSan build, which serves ~10x slower. clang links
# the sanitizer runtime into the binary, so ldd cannot tell; --version says so.
sanitizer_build() {
  "$OPTKIT" --version 2>/dev/null | grep -q '(ASan+UBSan)'
}

fail() {
  echo "FAIL: $*" >&2
  # A server test's failure shows what its last server logged (a crash, a signal, a refusal).
  if [ -s "$SCRATCH/server.log" ]; then
    echo "--- the last server's log ($SCRATCH/server.log), last 40 lines:" >&2
    tail -40 "$SCRATCH/server.log" >&2
  fi
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

# wait_for_file_text FILE TEXT: waits until FILE holds TEXT; fails after a minute (a deadline, not
# an expected duration).
wait_for_file_text() {
  for _ in $(seq 1 3000); do
    grep -qF -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.02
  done
  fail "$1 never held '$2': $(cat "$1" 2>/dev/null)"
}

# start_serve_deltas MODEL_DIR [FLAGS...]: serve-deltas on a free loopback port in the background
# (1 thread; pid in $server, port in $port, log in $SCRATCH/server.log, archive $SERVE_ARCHIVE or
# the test's), returning once it serves the model. The caller's EXIT trap kills $server.
start_serve_deltas() {
  local model=$1
  shift
  # Emptied here, before the fork: the child's own truncation may come after the first grep below,
  # which would then read the previous server's port from the old log.
  : >"$SCRATCH/server.log"
  "$OPTKIT" --archive "${SERVE_ARCHIVE:-$OPTKIT_ARCHIVE}" serve-deltas --base "$model" --port 0 --threads 1 "$@" \
    >"$SCRATCH/server.out" 2>"$SCRATCH/server.log" &
  server=$!
  port=""
  for _ in $(seq 1 3000); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$SCRATCH/server.log" | head -1 | grep -o '[0-9]*$' || true)
    [ -n "$port" ] && grep -q "serving '$(basename "$model")'" "$SCRATCH/server.log" && return 0
    kill -0 "$server" 2>/dev/null || fail "serve-deltas died: $(cat "$SCRATCH/server.log")"
    sleep 0.02
  done
  fail "serve-deltas did not come up: $(cat "$SCRATCH/server.log")"
}
