# optkit flow, black-box on the task model tiny-arith: a small job runs end to end (compress
# trials, baseline and per-trial gate, simulator study, bench of the chosen model, package with
# model, deploy/, a self-contained report.html, manifest and lineage), the archive holds one trial
# per task; kill -9 in each stage followed by `flow resume` ends with the same chosen model, byte
# for byte; a job whose gate no trial passes exits 1 before any bench; bad jobs exit 2 naming the
# file and key. Assertions are about structure and bytes, never about speed.
. "$(dirname "$0")/lib.sh"

data="$OPTKIT_SOURCE_DIR/testdata"
flow_pid=""
trap '[ -n "$flow_pid" ] && kill -KILL "$flow_pid" 2>/dev/null; rm -rf "$SCRATCH"' EXIT

cat >"$SCRATCH/gate.yaml" <<'YAML'
rules:
  - {suite: arith, metric: 'exact_match,strict-match', min_recovery: 0.9, alpha: 0.05}
YAML
# Two bench trials: a stall of this shared machine during one can break its steadiness (CI saw beta 2.05).
# max_trial_seconds 8: a p95 SLO sizes a trial at 250 requests, ~20 s at the sanitizer build's
# rate (~12 req/s); the cap leaves Release's trials (~200 req/s, about a second each) as they are.
cat >"$SCRATCH/job.yaml" <<YAML
name: small
model: $data/models/tiny-arith
compress: {recipes: [int_w8a8], trials: 2, calib: $data/corpora/english.calib.txt, samples: 16, seq_len: 64, seed: 5}
gate: {suite: arith, rules: gate.yaml, limit: 30}
bench: {profile: chat-small, slo: ["e2e:p95<=30s"], min_trial_seconds: 0.5, max_trial_seconds: 8, max_trials: 2,
  beta_tolerance: 0.9, max_dispatch_lag_ms: 1000}
tune: {sim: {space: sim-serving, optimizer: random, trials: 3}}
executor: {slots: 2, threads: 1}
YAML

run flow validate "$SCRATCH/job.yaml"
expect_rc 0
expect_out_has "valid (1 recipe(s) x 2 trial(s)"

# The reference: one uninterrupted run.
run flow run "$SCRATCH/job.yaml" -o "$SCRATCH/ref" --format json
expect_rc 0
pkg="$SCRATCH/ref/package"
for f in model/config.json model/model.safetensors deploy/launch.sh deploy/serving-profile.yaml report.md report.html \
  manifest.json lineage.json; do
  [ -s "$pkg/$f" ] || fail "package lacks $f"
done
[ -x "$pkg/deploy/launch.sh" ] || fail "launch.sh is not executable"
grep -q "serve-deltas --base model" "$pkg/deploy/launch.sh" || fail "launch.sh: $(cat "$pkg/deploy/launch.sh")"
python3 - "$OUT" "$pkg" <<'PY' || fail "flow JSON or package: $OUT"
import json, sys, os
from html.parser import HTMLParser
d = json.loads(sys.argv[1]); pkg = sys.argv[2]
assert d["status"] == "packaged", d
assert len(d["trials"]) == 2 and sum(t["chosen"] for t in d["trials"]) == 1, d["trials"]
assert all(t["status"] == "passed" for t in d["trials"]), d["trials"]
assert d["certified_rate"] > 0
stages = {s["stage"]: s for s in d["stages"]}
assert set(stages) == {"evaluate", "tune", "compress", "gate", "bench"}, stages
assert stages["compress"]["tasks"] == 2 and stages["gate"]["tasks"] == 2
class Refs(HTMLParser):
    refs = []
    def handle_starttag(self, tag, attrs):
        self.refs += [v for k, v in attrs if k in ("src", "href") and v and not v.startswith("#")]
p = Refs(); p.feed(open(os.path.join(pkg, "report.html")).read())
assert p.refs == [], p.refs   # no external asset: it opens anywhere
html = open(os.path.join(pkg, "report.html")).read()
assert "Compression trials and the quality gate" in html and "SLO certification" in html
# The charts inline: bench's latency vs rate, steady state, CDFs and timeline; the study's trajectory.
assert html.count("<svg") >= 5, html.count("<svg")
for title in ("Latency vs request rate", "Steady state at", "Latency CDFs at", "Requests over the trial at",
              "best feasible value so far"):
    assert title in html, title
md = open(os.path.join(pkg, "report.md")).read()
assert "| β | stable | why not |" in md and "recovery [95 % CI]" in md, md   # β per certification trial
m = json.load(open(os.path.join(pkg, "manifest.json")))
assert m["files"]["model/model.safetensors"], m
lineage = json.load(open(os.path.join(pkg, "lineage.json")))
assert {r["command"] for r in lineage} >= {"compress", "eval tasks", "bench", "tune"}, lineage
PY
# The report in a real browser (Debian's chromium, headless) served over loopback: it renders, and
# it asks the server for nothing but itself (a control copy with a broken image must be caught).
command -v chromium >/dev/null || fail "chromium is missing: scripts/install-deps.sh installs it (tests only)"
mkdir "$SCRATCH/site"
cp "$pkg/report.html" "$SCRATCH/site/report.html"
sed 's|<h1>|<img src="missing.png"><h1>|' "$pkg/report.html" >"$SCRATCH/site/control.html"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
(cd "$SCRATCH/site" && exec timeout 300 python3 -m http.server --bind 127.0.0.1 "$port" >"$SCRATCH/site.log" 2>&1) &
site_pid=$!
for _ in $(seq 1 100); do
  python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$port" 2>/dev/null && break
  sleep 0.1
done
requests_for() { # requests_for PAGE: the paths the browser asked for while rendering PAGE
  timeout 120 chromium --headless --no-sandbox --disable-gpu --user-data-dir="$SCRATCH/chromium" \
    --virtual-time-budget=3000 --dump-dom "http://127.0.0.1:$port/$1" >"$SCRATCH/$1.dom" 2>/dev/null
  sleep 0.2
  grep -o '"GET [^ ]*' "$SCRATCH/site.log" | sed 's/"GET //' | grep -v -e '^/favicon.ico$' -e "^/$1\$" -e '^/report.html$' \
    -e '^/control.html$' | sort -u
}
extra=$(requests_for report.html)
[ -z "$extra" ] || fail "report.html asked for $extra"
grep -q "Compression trials and the quality gate" "$SCRATCH/report.html.dom" || fail "the browser rendered no report"
[ "$(grep -o '<svg' "$SCRATCH/report.html.dom" | wc -l)" -ge 5 ] || fail "the browser rendered fewer than 5 charts"
[ "$(requests_for control.html)" = "/missing.png" ] || fail "the broken-reference check missed the control's image"
kill "$site_pid" 2>/dev/null
wait "$site_pid" 2>/dev/null

flow_run=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["run_id"])' "$OUT")
# One archived trial per task: baseline, simulator study, 2 compress, 2 gate, bench.
expect_eq "$(sql "SELECT COUNT(*) FROM trials WHERE run_id=$flow_run")" 7
expect_eq "$(sql "SELECT status FROM runs WHERE id=$flow_run")" "succeeded"

model_digest() { python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["recipe"], m["trial"], m["files"]["model/model.safetensors"], m["files"]["model/config.json"])' "$1/package/manifest.json"; }
reference=$(model_digest "$SCRATCH/ref")

# A second run of the same job reuses everything: no child runs, the same package.
run flow resume "$flow_run" --format json
expect_rc 0
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["reused_tasks"] == 7, d["reused_tasks"]' "$OUT" ||
  fail "resume of a finished flow ran work again: $OUT"

# kill -9 while each stage is running, then resume: the same chosen model, byte for byte.
# (The sanitizer build serves ~10x slower: it kills in the gate stage only, and leaves the Makefile
# below, which exercises no flow code, to the Release build.)
kill_stages=(compress gate bench)
asan=0
sanitizer_build && asan=1 && kill_stages=(gate)
for stage in "${kill_stages[@]}"; do
  out="$SCRATCH/killed-$stage"
  "$OPTKIT" -q flow run "$SCRATCH/job.yaml" -o "$out" >/dev/null 2>&1 &
  flow_pid=$!
  for _ in $(seq 1 2400); do
    compgen -G "$out/work/$stage[.-]*" >/dev/null && break
    kill -0 "$flow_pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL "$flow_pid" 2>/dev/null
  wait "$flow_pid" 2>/dev/null
  flow_pid=""
  [ -e "$out/package/manifest.json" ] && fail "the flow finished before it was killed in $stage"
  run flow status "$out" --format json
  expect_rc 0
  run flow resume "$out"
  expect_rc 0
  expect_out_has "package ready"
  expect_eq "$(model_digest "$out")" "$reference"
done
sleep 0.2
pgrep -f "flow run $SCRATCH/job.yaml" >/dev/null && fail "a killed flow left a process behind"
pgrep -f -- "--base $SCRATCH/killed" >/dev/null && fail "a killed flow left a server behind"

# Ctrl-C (SIGINT) while gates run: exit 130, children stopped, the run archived as interrupted.
"$OPTKIT" -q flow run "$SCRATCH/job.yaml" -o "$SCRATCH/interrupted" >/dev/null 2>&1 &
flow_pid=$!
for _ in $(seq 1 2400); do
  compgen -G "$SCRATCH/interrupted/work/gate.*" >/dev/null && break
  sleep 0.05
done
kill -INT "$flow_pid"
wait "$flow_pid"
rc=$?
flow_pid=""
expect_eq "$rc" 130
expect_eq "$(sql "SELECT status FROM runs WHERE command='flow run' ORDER BY id DESC LIMIT 1")" "interrupted"
sleep 0.2
pgrep -f -- "--model $SCRATCH/interrupted/" >/dev/null && fail "an interrupted flow left a child behind"

# SLOs no rate can meet: exit 1 naming the binding SLO, no live study, no package. The first wave
# is the reference's (its tasks' keys do not depend on the SLOs), so only the bench runs.
sed 's/e2e:p95<=30s/ttft:p50<=1us/' "$SCRATCH/job.yaml" >"$SCRATCH/infeasible.yaml"
mkdir "$SCRATCH/infeasible"
cp -r "$SCRATCH/ref/work" "$SCRATCH/infeasible/work"
run flow run "$SCRATCH/infeasible.yaml" -o "$SCRATCH/infeasible" --format json
expect_rc 1
expect_err_has "cannot meet the SLOs at any rate: SLO ttft:p50<=1us violated"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["status"] == "SLO infeasible" and d["reused_tasks"] == 6, d' \
  "$OUT" || fail "infeasible flow: $OUT"
[ -e "$SCRATCH/infeasible/package" ] && fail "a package was written for an infeasible SLO"

# A gate no trial can pass: exit 1 before any bench, the failed rule named, the stages that ran archived.
cat >"$SCRATCH/strict.yaml" <<'YAML'
rules:
  - {suite: arith, metric: 'exact_match,strict-match', min_recovery: 0.99, alpha: 0.05}
YAML
sed -e 's/recipes: \[int_w8a8\]/recipes: [w2.yaml]/' -e 's/rules: gate.yaml/rules: strict.yaml/' -e 's/trials: 2,/trials: 1,/' \
  "$SCRATCH/job.yaml" >"$SCRATCH/failing.yaml"
cp "$data/eval/w2a16_rtn.yaml" "$SCRATCH/w2.yaml"
run flow run "$SCRATCH/failing.yaml" -o "$SCRATCH/failing"
expect_rc 1
expect_err_has "no compression trial passed the quality gate"
expect_err_has "FAIL arith exact_match,strict-match"
compgen -G "$SCRATCH/failing/work/bench*" >/dev/null && fail "a bench ran after the gate failed"
[ -e "$SCRATCH/failing/package" ] && fail "a package was written after the gate failed"
failed_run=$(sql "SELECT MAX(id) FROM runs WHERE command='flow run'")
expect_eq "$(sql "SELECT status FROM runs WHERE id=$failed_run")" "goal_not_met"
expect_eq "$(sql "SELECT COUNT(*) FROM trials WHERE run_id=$failed_run")" 4 # baseline, study, compress, gate

# The same pipeline as a Makefile (profiles/flows/tiny-arith.mk): each stage an ordinary
# subcommand, make stops on a failed gate.
if [ "$asan" -eq 0 ]; then
  make_args=(-s -C "$OPTKIT_SOURCE_DIR" -f profiles/flows/tiny-arith.mk OPTKIT="$OPTKIT" OUT="$SCRATCH/mk" SEEDS=1 LIMIT=20
    SLO='e2e:p95<=30s' BENCH_FLAGS='--min-trial-seconds 0.5 --max-trials 2 --beta-tolerance 0.9 --max-dispatch-lag-ms 1000'
    TUNE_FLAGS='--optimizer random --trials 2 --top-k 0 --goodput-requests 16 --max-dispatch-lag-ms 1000')
  make "${make_args[@]}" >"$SCRATCH/make.log" 2>&1 || fail "make: $(cat "$SCRATCH/make.log")"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["best"]["launch"].startswith("optkit serve-deltas"), d' \
    "$SCRATCH/mk/tune.json" || fail "make: no tuned launch command"
  [ -s "$SCRATCH/mk/gate-1.json" ] && [ -s "$SCRATCH/mk/bench.json" ] || fail "make: stage outputs missing"
  make "${make_args[@]}" GATE="$SCRATCH/strict.yaml" OUT="$SCRATCH/mk-strict" CALIB= RECIPE="$SCRATCH/w2.yaml" \
    >"$SCRATCH/make.log" 2>&1 && fail "make went on past a failed gate"
  [ -e "$SCRATCH/mk-strict/gate-1.json" ] || [ -e "$SCRATCH/mk-strict/bench.json" ] &&
    fail "make wrote outputs of a failed gate"
fi

# Bad jobs: exit 2 naming the file and the key.
printf 'name: x\nmodel: m\ncompress: {recipes: [int_w8a8]}\n  bad indent: [\n' >"$SCRATCH/broken.yaml"
run flow validate "$SCRATCH/broken.yaml"
expect_rc 2
expect_err_has "broken.yaml:"
sed 's/recipes: \[int_w8a8\]/recipes: [int_w9a9]/' "$SCRATCH/job.yaml" >"$SCRATCH/unknown.yaml"
run flow run "$SCRATCH/unknown.yaml"
expect_rc 2
expect_err_has "compress.recipes 'int_w9a9'"
run flow resume "$SCRATCH/nowhere"
expect_rc 2
