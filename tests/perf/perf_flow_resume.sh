#!/usr/bin/env bash
# Kill-and-resume at random moments (issue goal: 10/10 identical packages) and the flow's own
# overhead. One uninterrupted run of a small tiny-arith job (2 int8 trials, gate on 60 arith
# problems, simulator study, a short certification) gives the reference package and its wall
# time W; then N runs are each killed with SIGKILL at a uniformly random moment in (0, W) and
# resumed with `flow resume`; each package's chosen model (recipe, trial, and every model file but
# the compression report, which records its own elapsed time) must equal the reference's byte for
# byte. Run by hand, never in CI:
#   tests/perf/perf_flow_resume.sh [OPTKIT] [N] [SEED]     (defaults build/optkit, 10, 1)
set -euo pipefail
optkit=$(realpath "${1:-build/optkit}")
runs=${2:-10}
RANDOM=${3:-1}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPTKIT_ARCHIVE="$work/archive.db"
data="$root/testdata"
cat >"$work/gate.yaml" <<'YAML'
rules:
  - {suite: arith, metric: 'exact_match,strict-match', min_recovery: 0.9, alpha: 0.05}
YAML
cat >"$work/job.yaml" <<YAML
name: resume-check
model: $data/models/tiny-arith
compress: {recipes: [int_w8a8, int_w4a16], trials: 2, calib: $data/corpora/english.calib.txt, samples: 16, seq_len: 64}
gate: {suite: arith, rules: gate.yaml, limit: 60}
bench: {profile: chat-small, slo: ["e2e:p95<=30s"], min_trial_seconds: 0.5, max_trials: 1, beta_tolerance: 0.9,
  max_dispatch_lag_ms: 1000}
tune: {sim: {space: sim-serving, optimizer: random, trials: 3}}
executor: {slots: 2, threads: 1}
YAML
digest() {
  python3 - "$1/package/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
files = {k: v for k, v in m["files"].items() if not k.endswith("compression_report.json")}
print(m["recipe"], m["trial"], json.dumps(files, sort_keys=True))
PY
}
start=$(date +%s.%N)
"$optkit" -q flow run "$work/job.yaml" -o "$work/ref" --format json >"$work/ref.json"
wall=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$(date +%s.%N)")
reference=$(digest "$work/ref")
python3 - "$work/ref.json" "$wall" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"reference: {float(sys.argv[2]):.1f} s wall; the flow's own work {d['orchestration_s']:.3f} s "
      f"= {100 * d['orchestration_s'] / d['wall_s']:.2f} % of its {d['wall_s']:.1f} s; "
      f"first wave as run {d['first_wave']['streaming_s']:.1f} s (idle {100 * d['first_wave']['streaming_idle']:.0f} %), "
      f"with OptiKit's stage barrier {d['first_wave']['barrier_s']:.1f} s (idle {100 * d['first_wave']['barrier_idle']:.0f} %)")
PY
same=0
for i in $(seq 1 "$runs"); do
  at=$(python3 -c "import sys; print(round(float(sys.argv[1]) * int(sys.argv[2]) / 32768, 2))" "$wall" "$RANDOM")
  out="$work/k$i"
  "$optkit" -q flow run "$work/job.yaml" -o "$out" >/dev/null 2>&1 &
  pid=$!
  sleep "$at"
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  finished=$(find "$out/work" -name result.json 2>/dev/null | wc -l)
  "$optkit" -q flow resume "$out" --format json >"$out.json"
  reused=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["reused_tasks"])' "$out.json")
  if [ "$(digest "$out")" = "$reference" ]; then
    same=$((same + 1))
    verdict=identical
  else
    verdict=DIFFERENT
  fi
  echo "run $i: killed at ${at} s with $finished tasks finished; resume reused $reused; package $verdict"
  rm -rf "$out"
done
echo "kill -9 and resume: $same/$runs packages identical to the uninterrupted run"
