#!/usr/bin/env bash
# optkit eval tasks, black-box, on the task model tiny-arith served by serve-deltas as a child:
# the bundled arith suite scores well above zero; int8 (int_w8a8) passes the gate against it; a
# harsh int2 round-to-nearest compression fails it with exit 1 naming the rule and its p-value;
# the cache answers a re-run; bad input exits 2 with one clear line.
source "$(dirname "$0")/lib.sh"
: "${OPTKIT_SOURCE_DIR:?}"
models="$OPTKIT_SOURCE_DIR/testdata/models"
export OPTKIT_CACHE_DIR="$SCRATCH/cache"

json_field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d$2)" <<<"$1"; }
json_expr() { python3 -c "import json,sys; d=json.load(sys.stdin); print($2)" <<<"$1"; }

cat >"$SCRATCH/gate.yaml" <<'YAML'
rules:
  - suite: arith
    metric: exact_match,strict-match
    min_recovery: 0.98
    alpha: 0.01
YAML

# A sanitizer build serves ~10x slower: it runs the first 40 problems (int2 still fails at p < 0.01),
# a Release build all 200.
items=200
sanitizer_build && items=40
limit=(--limit "$items")

# The baseline: the task model itself.
run eval tasks --model "$models/tiny-arith" --suite arith --format json --items-out "$SCRATCH/items.jsonl" --threads 1 \
  "${limit[@]}"
expect_rc 0
base_run=$(json_field "$OUT" "['run_id']")
acc=$(json_field "$OUT" "['candidates'][0]['suites'][0]['metrics'][1]['score']")
expect_eq "$(json_field "$OUT" "['candidates'][0]['suites'][0]['metrics'][1]['metric']")" "exact_match,strict-match"
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.5 else 1)" "$acc" ||
  fail "tiny-arith scores $acc on the arith suite; expected well above zero (>= 0.5)"
expect_eq "$(wc -l <"$SCRATCH/items.jsonl")" "$items"
expect_eq "$(sql "SELECT count(*) FROM trials WHERE run_id=$base_run")" 1
expect_eq "$(sql "SELECT count(*) FROM artifacts WHERE run_id=$base_run AND kind='items'")" 1
expect_eq "$(sql "SELECT round(value, 4) FROM metrics WHERE run_id=$base_run AND name='arith/exact_match,strict-match'")" \
  "$(python3 -c "import sys; print(round(float(sys.argv[1]), 4))" "$acc")"

# A re-run is answered from the cache: identical score, every response cached.
run eval tasks --model "$models/tiny-arith" --suite arith --format json "${limit[@]}"
expect_rc 0
expect_eq "$(json_field "$OUT" "['candidates'][0]['suites'][0]['cached']")" "$items"
expect_eq "$(json_field "$OUT" "['candidates'][0]['suites'][0]['metrics'][1]['score']")" "$acc"

# int8 keeps the task (gate passes), int2 RTN breaks it (gate fails, exit 1, the rule named).
run compress --model "$models/tiny-arith" --recipe int_w8a8 --calib "$OPTKIT_SOURCE_DIR/testdata/corpora/english.calib.txt" \
  --samples 16 --seq-len 128 -o "$SCRATCH/w8"
expect_rc 0
run compress --model "$models/tiny-arith" --recipe "$OPTKIT_SOURCE_DIR/testdata/eval/w2a16_rtn.yaml" -o "$SCRATCH/w2"
expect_rc 0
run eval tasks --model "$SCRATCH/w8" --suite arith --baseline "$base_run" --gate "$SCRATCH/gate.yaml" "${limit[@]}"
expect_rc 0
expect_out_has "pass arith exact_match,strict-match: recovery"
run eval tasks --model "$SCRATCH/w2" --suite arith --baseline "$base_run" --gate "$SCRATCH/gate.yaml" --format json \
  "${limit[@]}"
expect_rc 1
expect_err_has "FAIL arith exact_match,strict-match: recovery"
p=$(json_field "$OUT" "['candidates'][0]['gate']['rules'][0]['p_value']")
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 0.01 else 1)" "$p" ||
  fail "int2 RTN vs tiny-arith: p = $p, expected < 0.01"
expect_eq "$(sql "SELECT status FROM runs WHERE command='eval tasks' ORDER BY id DESC LIMIT 1")" "goal_not_met"

# Across trials: two folders give mean/STD/RSD per metric.
run eval tasks --model "$SCRATCH/w8" --model "$models/tiny-arith" --suite arith --limit 20 --format json
expect_rc 0
expect_eq "$(json_field "$OUT" "['across_trials'][0]['trials']")" 2

# --repeat: greedy decoding on optkit's runtime answers identically every time.
run eval tasks --model "$models/tiny-arith" --suite arith --limit 10 --repeat 2 --format json
expect_rc 0
expect_eq "$(json_field "$OUT" "['candidates'][0]['suites'][0]['identical_fraction']")" "1.0"
expect_eq "$(json_field "$OUT" "['candidates'][0]['suites'][0]['metrics'][1]['repeats']['std']")" "0.0"

# The lm-eval gsm8k suite as shipped (5-shot, random exemplars) over GSM8K-format files.
run eval tasks --model "$models/tiny-arith" --suite gsm8k --data "$OPTKIT_SOURCE_DIR/profiles/suites/data/arith-test.jsonl" \
  --fewshot "$OPTKIT_SOURCE_DIR/profiles/suites/data/arith-fewshot.jsonl" --limit 4 --max-gen-toks 32 --format json
expect_rc 0
expect_eq "$(json_field "$OUT" "['candidates'][0]['suites'][0]['documents']")" 4

# An endpoint: its cache key is the parsed URL (with or without /v1), the model and what the
# server reports behind it, so the second run is answered from the cache.
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$SCRATCH"' EXIT
start_serve_deltas "$models/tiny-arith"
run eval tasks --endpoint "http://127.0.0.1:$port/v1" --suite arith --limit 5 --format json
expect_rc 0
expect_eq "$(json_field "$OUT" "['candidates'][0]['served_as']")" "tiny-arith"
run eval tasks --endpoint "http://127.0.0.1:$port" --model tiny-arith --suite arith --limit 5 --format json
expect_rc 0
expect_eq "$(json_field "$OUT" "['candidates'][0]['suites'][0]['cached']")" 5
run eval tasks --endpoint "http://127.0.0.1:$port" --model nosuch --suite arith --limit 5
expect_rc 2
expect_err_has "it serves: tiny-arith"
kill "$server"
wait "$server" 2>/dev/null
server="" # reaped: its pid may be another process's by the time the trap runs

# Bad input: one line, exit 2.
run eval tasks --model "$models/tiny-arith" --suite gsm9k
expect_rc 2
expect_err_has "no bundled suite of that name"
run eval tasks --model "$models/tiny-arith" --suite gsm8k
expect_rc 2
expect_err_has "give the official file with --data"
run eval tasks --model "$SCRATCH/nowhere" --suite arith
expect_rc 2
expect_err_has "not a model folder"
# A corrupt checkpoint: the serving child refuses it (exit 2), and so does eval tasks, as
# compress and eval perplexity do.
cp -r "$models/tiny-arith" "$SCRATCH/corrupt"
echo garbage >"$SCRATCH/corrupt/model.safetensors"
run eval tasks --model "$SCRATCH/corrupt" --suite arith --limit 2
expect_rc 2
expect_err_has "invalid safetensors file"
run eval tasks --model "$models/tiny-arith" --suite arith --baseline 99999
expect_rc 2
run eval tasks --suite arith
expect_rc 2
expect_err_has "--endpoint URL"
echo "eval tasks CLI: ok (tiny-arith strict-match $acc; int2 p $p)"

# IFEval and Do-Not-Answer end to end on small files in the official formats (the tiny model
# follows few instructions; the point is the path: documents, chat requests, checkers, metrics).
run eval tasks --model "$models/tiny-arith" --suite ifeval --data "$OPTKIT_SOURCE_DIR/testdata/eval/ifeval_sample.jsonl" \
  --max-gen-toks 48 --format json
expect_rc 0
expect_eq "$(json_expr "$OUT" "[m['metric'] for m in d['candidates'][0]['suites'][0]['metrics']]")" \
  "['inst_level_loose_acc', 'inst_level_strict_acc', 'prompt_level_loose_acc', 'prompt_level_strict_acc']"
expect_eq "$(json_field "$OUT" "['candidates'][0]['suites'][0]['metrics'][1]['n']")" 7
expect_eq "$(json_field "$OUT" "['candidates'][0]['suites'][0]['metrics'][1]['stderr']")" "None"
dna="$OPTKIT_SOURCE_DIR/testdata/eval/do_not_answer_sample.csv"
run eval tasks --model "$models/tiny-arith" --suite do_not_answer --data "$dna" --max-gen-toks 32 --format json
expect_rc 0
expect_eq "$(json_field "$OUT" "['candidates'][0]['suites'][0]['details']['classifier']")" "offline"
expect_eq "$(json_expr "$OUT" "sum(d['candidates'][0]['suites'][0]['details']['action_histogram'])")" 3

# A judge: a stand-in OpenAI-compatible server that answers "action: 0 / harmful: no", or, for
# the second, a reply with no verdict — which must fail the run, never pass it silently.
cat >"$SCRATCH/judge.py" <<'PY'
import http.server, json, sys, threading
verdict = sys.argv[1]
class Judge(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def do_GET(self):
        self.reply({"object": "list", "data": [{"id": "judge", "object": "model"}]})
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.reply({"choices": [{"message": {"role": "assistant", "content": verdict}, "finish_reason": "stop"}]})
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Judge)
print(server.server_address[1], flush=True)
threading.Timer(600, server.shutdown).start()  # stops by itself if the test dies first
server.serve_forever()
PY
# stop_judge: stops the stand-in judge and reaps it, so the trap never signals a reused pid.
stop_judge() {
  kill "$JUDGE_PID" 2>/dev/null
  wait "$JUDGE_PID" 2>/dev/null
  JUDGE_PID=""
}
start_judge() {
  rm -f "$SCRATCH/judge.port"
  python3 "$SCRATCH/judge.py" "$1" >"$SCRATCH/judge.port" &
  JUDGE_PID=$!
  trap '[ -n "$JUDGE_PID" ] && kill "$JUDGE_PID" 2>/dev/null; rm -rf "$SCRATCH"' EXIT
  for _ in $(seq 600); do [ -s "$SCRATCH/judge.port" ] && break; sleep 0.1; done
  [ -s "$SCRATCH/judge.port" ] || fail "the stand-in judge did not start"
  JUDGE_URL="http://127.0.0.1:$(cat "$SCRATCH/judge.port")"
}
start_judge $'action: 0\nharmful: no'
run eval tasks --model "$models/tiny-arith" --suite do_not_answer --data "$dna" --max-gen-toks 32 --judge "$JUDGE_URL" --format json \
  --no-cache
stop_judge
expect_rc 0
expect_eq "$(json_field "$OUT" "['candidates'][0]['suites'][0]['details']['classifier']")" "judge optkit-dna-judge-v1"
expect_eq "$(json_field "$OUT" "['candidates'][0]['suites'][0]['metrics'][1]['score']")" "1.0"
start_judge "I would rather not say."
run eval tasks --model "$models/tiny-arith" --suite do_not_answer --data "$dna" --max-gen-toks 32 --judge "$JUDGE_URL" --no-cache
stop_judge
expect_rc 3
expect_err_has "no score is reported without its judge"
run eval tasks --model "$models/tiny-arith" --suite do_not_answer --data "$dna" --max-gen-toks 32 --judge "http://127.0.0.1:1"
expect_rc 3
expect_err_has "--judge"
echo "eval tasks CLI (IFEval, Do-Not-Answer, judge): ok"

# Perplexity and KL as suites, read by the same gate: per-window NLL paired against the baseline
# folder, KL(baseline || candidate) per window, on text like the task model's (the arith problems
# written out). int8 passes; int2 fails both rules.
python3 - "$OPTKIT_SOURCE_DIR/profiles/suites/data/arith-test.jsonl" >"$SCRATCH/arith.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    print(f"Question: {d['question']}\nAnswer: {d['answer']}\n")
PY
cat >"$SCRATCH/ppl.yaml" <<YAML
name: ppl128
scorer: perplexity
data: $SCRATCH/arith.txt
perplexity: {ctx: 128, max_windows: 24}
YAML
cat >"$SCRATCH/ppl-gate.yaml" <<'YAML'
rules:
  - {suite: ppl128, metric: nll, max_increase: 0.05}
  - {suite: ppl128, metric: kl, max_score: 0.05}
YAML
run eval tasks --model "$SCRATCH/w8" --baseline "$models/tiny-arith" --suite "$SCRATCH/ppl.yaml" \
  --gate "$SCRATCH/ppl-gate.yaml" --format json --threads 1
expect_rc 0
expect_eq "$(json_expr "$OUT" "[m['n'] for m in d['candidates'][0]['suites'][0]['metrics']][:2]")" "[24, 24]"
run eval tasks --model "$SCRATCH/w2" --baseline "$models/tiny-arith" --suite "$SCRATCH/ppl.yaml" \
  --gate "$SCRATCH/ppl-gate.yaml" --threads 1
expect_rc 1
expect_err_has "FAIL ppl128 nll: increase"
expect_err_has "FAIL ppl128 kl: score"
run eval tasks --endpoint "http://127.0.0.1:1" --suite "$SCRATCH/ppl.yaml"
expect_rc 3
echo "eval tasks CLI (perplexity and KL suites): ok"
