#!/usr/bin/env bash
# optkit eval tasks on the multiple-choice suites, black-box: arc_easy prints acc and acc_norm with
# their stderr; on the task model tiny-arith, int8 passes an mmlu_continuation gate on the MMLU
# sample and int2 RTN fails it at p < 0.01; an endpoint is scored through --tokenizer; a server
# that refuses echo (llama.cpp's llama-server), a chat-completions URL, a file of other columns and
# a missing file each exit 2 with one line naming the fix; --apply-chat-template, --system-instruction
# and --reasoning-end on the way.
source "$(dirname "$0")/lib.sh"
: "${OPTKIT_SOURCE_DIR:?}"
models="$OPTKIT_SOURCE_DIR/testdata/models"
data="$OPTKIT_SOURCE_DIR/profiles/suites/data"
export OPTKIT_CACHE_DIR="$SCRATCH/cache"
json_field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d$2)" <<<"$1"; }
json_expr() { python3 -c "import json,sys; d=json.load(sys.stdin); print($2)" <<<"$1"; }

# acc and acc_norm with their stderr, on the sample given as --data.
run eval tasks --model "$models/tiny-arith" --suite arc_easy --data "$data/arc_easy-sample.jsonl" --threads 1
expect_rc 0
expect_out_has "stderr"
expect_out_has "arc_easy  acc "
expect_out_has "arc_easy  acc_norm "
run eval tasks --model "$models/tiny-arith" --suite arc_easy --data "$data/arc_easy-sample.jsonl" --format json
expect_rc 0
expect_eq "$(json_expr "$OUT" "[(m['metric'], m['n']) for m in d['candidates'][0]['suites'][0]['metrics']]")" \
  "[('acc', 12), ('acc_norm', 12)]"
expect_eq "$(json_expr "$OUT" "d['candidates'][0]['suites'][0]['metrics'][0]['stderr'] > 0")" "True"

# Every bundled multiple-choice suite runs on its sample.
for suite in arc_challenge hellaswag winogrande piqa truthfulqa_mc1 truthfulqa_mc2; do
  run eval tasks --model "$models/tiny-arith" --suite "$suite" --threads 1 --format json
  expect_rc 0
done
expect_eq "$(json_field "$OUT" "['candidates'][0]['suites'][0]['metrics'][0]['metric']")" "acc"

# The gate: MMLU's sample scored as mmlu_continuation (its worked arithmetic answers are what the
# task model can tell apart); a sanitizer build runs the first 60 questions (48 arithmetic ones).
items=212
sanitizer_build && items=60
limit=(--limit "$items")
cat >"$SCRATCH/gate.yaml" <<'YAML'
rules:
  - suite: mmlu_continuation
    metric: acc
    min_recovery: 0.95
    alpha: 0.01
  - suite: mmlu_continuation
    metric: acc,stem
    min_recovery: 0.95
    alpha: 0.01
YAML
run eval tasks --model "$models/tiny-arith" --suite mmlu_continuation --threads 1 --format json "${limit[@]}"
expect_rc 0
base_run=$(sql "SELECT id FROM runs WHERE command='eval tasks' ORDER BY id DESC LIMIT 1")
base_acc=$(json_field "$OUT" "['candidates'][0]['suites'][0]['metrics'][0]['score']")
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.6 else 1)" "$base_acc" ||
  fail "tiny-arith scores $base_acc on the MMLU sample; expected well above chance (>= 0.6)"
expect_eq "$(json_expr "$OUT" "[m['metric'] for m in d['candidates'][0]['suites'][0]['metrics']][:3]")" \
  "['acc', 'acc,stem', 'acc,humanities']"
run compress --model "$models/tiny-arith" --recipe int_w8a8 --calib "$OPTKIT_SOURCE_DIR/testdata/corpora/english.calib.txt" \
  --samples 16 --seq-len 128 -o "$SCRATCH/w8"
expect_rc 0
run compress --model "$models/tiny-arith" --recipe "$OPTKIT_SOURCE_DIR/testdata/eval/w2a16_rtn.yaml" -o "$SCRATCH/w2"
expect_rc 0
run eval tasks --model "$SCRATCH/w8" --suite mmlu_continuation --baseline "$base_run" --gate "$SCRATCH/gate.yaml" \
  --threads 1 "${limit[@]}"
expect_rc 0
expect_out_has "pass mmlu_continuation acc: recovery"
expect_out_has "pass mmlu_continuation acc,stem: recovery"
run eval tasks --model "$SCRATCH/w2" --suite mmlu_continuation --baseline "$base_run" --gate "$SCRATCH/gate.yaml" \
  --threads 1 --format json "${limit[@]}"
expect_rc 1
expect_err_has "FAIL mmlu_continuation acc: recovery"
p=$(json_field "$OUT" "['candidates'][0]['gate']['rules'][0]['p_value']")
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 0.01 else 1)" "$p" ||
  fail "int2 RTN vs tiny-arith on the MMLU sample: p = $p, expected < 0.01"

# An endpoint: the client tokenizes with --tokenizer and gets the same loglikelihoods as the
# local run (the cache is bypassed: these are new requests).
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; [ -n "${STANDIN:-}" ] && kill "$STANDIN" 2>/dev/null; rm -rf "$SCRATCH"' EXIT
start_serve_deltas "$models/tiny-arith"
run eval tasks --model "$models/tiny-arith" --suite piqa --format json --no-cache --items-out "$SCRATCH/local.jsonl" \
  --threads 1
expect_rc 0
run eval tasks --endpoint "http://127.0.0.1:$port/v1/completions" --suite piqa --no-cache \
  --items-out "$SCRATCH/endpoint.jsonl"
expect_err_has "--tokenizer"
expect_rc 2
run eval tasks --endpoint "http://127.0.0.1:$port/v1/completions" --tokenizer "$models/tiny-arith" --suite piqa \
  --no-cache --items-out "$SCRATCH/endpoint.jsonl"
expect_rc 0
python3 - "$SCRATCH/local.jsonl" "$SCRATCH/endpoint.jsonl" <<'PY' || fail "the endpoint's loglikelihoods differ from the local run's"
import json, sys
a, b = ([json.loads(l)["answers"]["loglikelihoods"] for l in open(f)] for f in sys.argv[1:3])
assert len(a) == len(b) == 8, (len(a), len(b))
assert all(abs(x - y) < 1e-4 for u, v in zip(a, b) for x, y in zip(u, v)), (a, b)
PY
run eval tasks --endpoint "http://127.0.0.1:$port/v1/chat/completions" --tokenizer "$models/tiny-arith" --suite piqa
expect_rc 2
expect_err_has "chat-completions API cannot return"
kill "$server"
wait "$server" 2>/dev/null
server=""

# A server that refuses echo, as llama.cpp's llama-server does: one line saying so.
cat >"$SCRATCH/standin.py" <<'PY'
import http.server, json, threading
class NoEcho(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def do_GET(self):
        self.reply(200, {"object": "list", "data": [{"id": "model.gguf", "object": "model"}]})
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.reply(400, {"error": {"code": 400, "message": "Only no echo is supported",
                                   "type": "invalid_request_error"}})
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NoEcho)
print(server.server_address[1], flush=True)
threading.Timer(600, server.shutdown).start()  # stops by itself if the test dies first
server.serve_forever()
PY
python3 "$SCRATCH/standin.py" >"$SCRATCH/standin.port" &
STANDIN=$!
for _ in $(seq 600); do [ -s "$SCRATCH/standin.port" ] && break; sleep 0.1; done
run eval tasks --endpoint "http://127.0.0.1:$(cat "$SCRATCH/standin.port")" --tokenizer "$models/tiny-arith" \
  --suite piqa --no-cache
expect_rc 2
expect_err_has "refuses echo on /v1/completions"
expect_err_has "llama.cpp"

# Chat and reasoning models: the model's chat template renders prompts (its turns and a system
# instruction); answers are scored after the end-of-thinking marker, and those that never wrote it
# are counted and reported.
run eval tasks --model "$models/tiny-arith" --suite mmlu --limit 8 --apply-chat-template \
  --system-instruction "Answer with a letter." --threads 1 --format json
expect_rc 0
expect_eq "$(json_field "$OUT" "['candidates'][0]['suites'][0]['metrics'][0]['n']")" 8
run eval tasks --model "$models/tiny-arith" --suite arith --limit 6 --reasoning-end "</think>" --threads 1 --format json
expect_rc 0
expect_eq "$(json_field "$OUT" "['candidates'][0]['suites'][0]['reasoning']")" "{'end_marker': '</think>', 'unclosed': 6}"
run eval tasks --model "$models/tiny-arith" --suite arith --limit 6 --reasoning-end "#### " --threads 1
expect_rc 0
expect_out_has "arith: 0 of 6 answers never closed their reasoning (#### )"
run eval tasks --model "$models/tiny-arith" --suite arith --limit 3 --fewshot-as-multiturn
expect_rc 2
expect_err_has "add --apply-chat-template"
run eval tasks --endpoint "http://127.0.0.1:9" --suite arith --apply-chat-template
expect_rc 2
expect_err_has "give --tokenizer DIR"

# Bad input: one line, exit 2.
echo '{"q": "x", "options": ["a", "b"], "key": "A"}' >"$SCRATCH/other.jsonl"
run eval tasks --model "$models/tiny-arith" --suite arc_easy --data "$SCRATCH/other.jsonl"
expect_rc 2
expect_err_has "document 0 has no question, choices, answerKey"
run eval tasks --model "$models/tiny-arith" --suite mmlu --data "$SCRATCH/nowhere.jsonl"
expect_rc 2
expect_err_has "nowhere.jsonl: no such file"
printf 'PAR1' >"$SCRATCH/test-00000-of-00001.parquet"
run eval tasks --model "$models/tiny-arith" --suite mmlu --data "$SCRATCH/test-00000-of-00001.parquet"
expect_rc 2
expect_err_has "export it first"
echo "eval tasks multiple-choice CLI: ok (tiny-arith MMLU sample acc $base_acc; int2 p $p)"
