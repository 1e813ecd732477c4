#!/usr/bin/env bash
# Issue 47's goal for shared-prefix traffic: against serve-deltas with --enable-prefix-caching,
# the rate bench certifies for a profile whose requests share system prompts is higher than
# without it. Side by side in one run, on the same machine: serve-deltas on tiny-base (its real
# CPU runtime) with and without prefix caching, each certified by bench from its default start
# under one SLO, interleaved REPEATS times (each pair in both orders, to cancel drift); prints
# each rate and the ratio of the medians. Run by hand, never in CI:
#   tests/perf/perf_bench_prefix_caching.sh [OPTKIT] [PROFILE] [SLO] [REPEATS]
#   (defaults build/optkit, system-prompts, 'e2e:p95<=2s', 1)
set -euo pipefail
optkit=$(realpath "${1:-build/optkit}")
profile=${2:-system-prompts}
slo=${3:-e2e:p95<=2s}
repeats=${4:-1}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
export OPTKIT_ARCHIVE="$work/archive.db"

# certify CACHING(on|off): the certified req/s of serve-deltas with or without prefix caching.
certify() {
  local flag=--no-enable-prefix-caching
  [ "$1" = on ] && flag=--enable-prefix-caching
  : >"$work/server.log" # before the fork, so the wait below cannot read the last server's port
  "$optkit" serve-deltas --base "$root/testdata/models/tiny-base" --port 0 "$flag" >"$work/server.out" \
    2>"$work/server.log" &
  server=$!
  local port=""
  for _ in $(seq 1 600); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/server.log" | head -1 | grep -o '[0-9]*$' || true)
    [ -n "$port" ] && grep -q "serving 'tiny-base'" "$work/server.log" && break
    sleep 0.05
  done
  "$optkit" bench --endpoint "http://127.0.0.1:$port" --profile "$profile" --slo "$slo" --format json \
    >"$work/bench.json" 2>/dev/null || true
  kill "$server" && wait "$server" 2>/dev/null || true
  server=""
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["certified_rate"], r["status"], len(r["trials"]))' \
    "$work/bench.json"
}

on=() off=()
for ((i = 0; i < repeats; ++i)); do
  for mode in $([ $((i % 2)) -eq 0 ] && echo "off on" || echo "on off"); do
    read -r rate status trials <<<"$(certify "$mode")"
    echo "prefix caching $mode: $rate req/s ($status, $trials trials)"
    [ "$mode" = on ] && on+=("$rate") || off+=("$rate")
  done
done
python3 - "${on[*]}" "${off[*]}" <<'PY'
import statistics, sys
on = [float(x) for x in sys.argv[1].split()]
off = [float(x) for x in sys.argv[2].split()]
print(f"median certified rate: with prefix caching {statistics.median(on):.1f} req/s, without "
      f"{statistics.median(off):.1f} req/s: ratio {statistics.median(on) / statistics.median(off):.2f}x")
PY
