#!/usr/bin/env bash
# Starts `optkit serve-deltas` on a free loopback port, runs the openai npm client against it,
# then stops it with SIGTERM and checks it exits 0 and leaves nothing running.
#   openai_client.sh OPTKIT NODE_MODULES SOURCE_DIR
set -euo pipefail
optkit=$1 modules=$2 source=$3
work=$(mktemp -d)
export OPTKIT_ARCHIVE="$work/archive.db"
"$optkit" serve-deltas --base "$source/testdata/models/tiny-base" --port 0 --api-key sesame --threads 1 \
  2>"$work/server.log" &
server=$!
trap 'kill -KILL $server 2>/dev/null || true; rm -rf "$work"' EXIT
port=""
for _ in $(seq 1 600); do # up to 60 s for the port line, then the model
  port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/server.log" | head -1 | grep -o '[0-9]*$' || true)
  [ -n "$port" ] && python3 - "$port" <<'PY' && break
import sys, urllib.request
try:
    urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=5)
except Exception:
    sys.exit(1)
PY
  kill -0 $server 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "server never listened" >&2; cat "$work/server.log" >&2; exit 1; }
node "$source/tests/conformance/openai_client.mjs" "http://127.0.0.1:$port" sesame "$modules"
kill -TERM $server
rc=0
wait $server || rc=$?
[ $rc -eq 0 ] || { echo "serve-deltas exited $rc after SIGTERM" >&2; cat "$work/server.log" >&2; exit 1; }
trap 'rm -rf "$work"' EXIT
