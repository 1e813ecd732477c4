# optkit serve-deltas as a black box over HTTP, with Python's http.client as an independent client:
# bad requests get clear 4xx answers and the server keeps serving; an oversized body is 413; a
# prompt beyond the context is 400 naming the limit; Ctrl-C exits 130, SIGTERM exits 0, and the
# run is archived; prefix caching reuses a prompt's blocks and says so.
. "$(dirname "$0")/lib.sh"

base="$OPTKIT_SOURCE_DIR/testdata/models/tiny-base"
server=""
# A failed expectation must not leave a server holding ctest's output pipe open.
trap '[ -n "$server" ] && kill -KILL "$server" 2>/dev/null; rm -rf "$SCRATCH"' EXIT


# http METHOD PATH BODY: prints "STATUS BODY".
http() {
  python3 - "$port" "$1" "$2" "${3-}" <<'PY'
import http.client, sys
port, method, path, body = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=60)
c.request(method, path, body=body.encode() if body else None, headers={"Content-Type": "application/json"})
r = c.getresponse()
print(r.status, r.read().decode())
PY
}

# completion_text "STATUS BODY": the text of a completion answer.
completion_text() {
  python3 -c 'import json,sys; print(json.loads(sys.argv[1].split(" ",1)[1])["choices"][0]["text"])' "$1"
}

# A real delta of tiny-code against tiny-base, served beside the base as model "code".
run -q compress delta --base "$base" --finetuned "$OPTKIT_SOURCE_DIR/testdata/models/tiny-code" \
  --recipe delta_2of4_int4 --calib "$OPTKIT_SOURCE_DIR/testdata/corpora/code.calib.txt" --samples 4 --seq-len 32 \
  -o "$SCRATCH/code"
expect_rc 0
# A PEFT LoRA adapter of tiny-base with B = 0 (what PEFT initialises): it must answer as the base.
python3 - "$SCRATCH/lora" <<'PY'
import json, os, random, struct, sys
out = sys.argv[1]
os.makedirs(out)
json.dump({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": ["q_proj"], "bias": "none"},
          open(os.path.join(out, "adapter_config.json"), "w"))
prefix = "base_model.model.model.layers.0.self_attn.q_proj."
tensors = {prefix + "lora_A.weight": ([4, 192], [random.uniform(-1, 1) for _ in range(4 * 192)]),
           prefix + "lora_B.weight": ([192, 4], [0.0] * (192 * 4))}
header, data = {}, b""
for name, (shape, values) in tensors.items():
    blob = struct.pack(f"<{len(values)}f", *values)
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
    data += blob
head = json.dumps(header).encode()
open(os.path.join(out, "adapter_model.safetensors"), "wb").write(struct.pack("<Q", len(head)) + head + data)
PY
# Runtime adapter loading, opted into and confined to $SCRATCH/adapters (4 registered at most).
mkdir -p "$SCRATCH/adapters/notdelta" "$SCRATCH/adapters/zero" "$SCRATCH/adapters/fifo"
cp -r "$SCRATCH/code" "$SCRATCH/adapters/code"
cp "$OPTKIT_SOURCE_DIR/testdata/models/tiny-quotes/config.json" "$SCRATCH/adapters/notdelta/"
cp -r "$SCRATCH/code/." "$SCRATCH/adapters/zero/"
ln -sf /dev/zero "$SCRATCH/adapters/zero/delta.safetensors"
cp -r "$SCRATCH/code/." "$SCRATCH/adapters/fifo/"
rm "$SCRATCH/adapters/fifo/delta_config.json"
mkfifo "$SCRATCH/adapters/fifo/delta_config.json"
ln -s "$SCRATCH/code" "$SCRATCH/adapters/outside"
start_serve_deltas "$base" --max-num-seqs 4 --delta "code=$SCRATCH/code" --lora "zero=$SCRATCH/lora" \
  --enable-adapter-loading --adapter-root "$SCRATCH/adapters" --max-adapters 4
out=$(http POST /v1/completions '{"model": "zero", "prompt": "Hello there", "max_tokens": 5, "temperature": 0}')
lora_text=$(completion_text "$out")
out=$(http POST /v1/completions '{"prompt": "Hello there", "max_tokens": 5, "temperature": 0}')
base_text=$(completion_text "$out")
[ "$lora_text" = "$base_text" ] || fail "a B = 0 LoRA answers '$lora_text', the base '$base_text'"
out=$(http GET /health) && [ "${out%% *}" = 200 ] || fail "health: $out"
out=$(http GET /v1/models '')
[[ $out == *'"id":"code"'*'"parent":"tiny-base"'* ]] || fail "the variant is not listed with its parent: $out"
out=$(http POST /v1/completions '{"model": "code", "prompt": "def main(", "max_tokens": 6, "temperature": 0}')
[[ $out == 200* && $out == *'"model":"code"'* ]] || fail "a completion from the variant: $out"
decoupled_text=$(completion_text "$out")
out=$(http POST /v1/completions '{"model": "nope", "prompt": "x"}')
[[ $out == 404* && $out == *"served: tiny-base, code"* ]] || fail "unknown model: $out"

# Registering while serving, as vLLM's clients do: the same artifact under a second name.
out=$(http POST /v1/load_lora_adapter "{\"lora_name\": \"code2\", \"lora_path\": \"$SCRATCH/adapters/code\"}")
[[ $out == "200 Success: LoRA adapter 'code2' added successfully." ]] || fail "load_lora_adapter: $out"
out=$(http GET /v1/models '')
[[ $out == *'"id":"code2"'*'"parent":"tiny-base"'* ]] || fail "the loaded delta is not listed: $out"
out=$(http POST /v1/completions '{"model": "code2", "prompt": "def main(", "max_tokens": 6, "temperature": 0}')
loaded_text=$(completion_text "$out")
[ "$loaded_text" = "$decoupled_text" ] || fail "the delta loaded over HTTP: '$loaded_text', at start: '$decoupled_text'"
out=$(http POST /v1/load_lora_adapter "{\"lora_name\": \"code2\", \"lora_path\": \"code\"}")
[[ $out == 400* && $out == *"already served"* ]] || fail "a second load under a taken name: $out"
out=$(http POST /v1/load_lora_adapter '{"lora_name": "quotes", "lora_path": "notdelta"}')
[[ $out == 400* && $out == *'"param":"lora_path"'* ]] || fail "a folder that is not a delta: $out"
# Missing, outside the root (by .., by an absolute path, by a link), a link to /dev/zero, a FIFO:
# one answer, which says nothing of what exists.
for path in nowhere ../code "$SCRATCH/code" outside /etc zero fifo; do
  out=$(http POST /v1/load_lora_adapter "{\"lora_name\": \"other\", \"lora_path\": \"$path\"}")
  [[ $out == 400* && $out == *"lora_path '$path' is not an adapter under the adapter root"* ]] ||
    fail "lora_path $path: $out"
done
out=$(http POST /v1/load_lora_adapter "{\"lora_name\": \"$(printf 'n%.0s' $(seq 200))\", \"lora_path\": \"code\"}")
[[ $out == 400* && $out == *'"param":"lora_name"'* ]] || fail "a 200-byte adapter name: $out"
out=$(http POST /v1/load_lora_adapter '{"lora_name": "code3", "lora_path": "code"}')
[[ $out == 200* ]] || fail "a fourth adapter: $out"
out=$(http POST /v1/load_lora_adapter '{"lora_name": "code4", "lora_path": "code"}')
[[ $out == 400* && $out == *"holds 4 adapters, its --max-adapters"* ]] || fail "a fifth adapter: $out"
out=$(http POST /v1/unload_lora_adapter '{"lora_name": "code3"}')
[[ $out == 200* ]] || fail "unloading the fourth adapter: $out"
out=$(http POST /v1/load_lora_adapter '{"lora_name": "x"}')
[[ $out == 400* && $out == *"'lora_path' must be a non-empty string"* ]] || fail "a load without a path: $out"
out=$(http POST /v1/unload_lora_adapter '{"lora_name": "code2"}')
[[ $out == "200 Success: LoRA adapter 'code2' removed successfully." ]] || fail "unload_lora_adapter: $out"
out=$(http POST /v1/completions '{"model": "code2", "prompt": "x", "max_tokens": 1}')
[[ $out == 404* ]] || fail "a request for an unloaded delta: $out"
out=$(http POST /v1/unload_lora_adapter '{"lora_name": "code2"}')
[[ $out == 404* ]] || fail "unloading twice: $out"

out=$(http POST /v1/completions '{"prompt": "Hello", "max_tokens": 4')
[[ $out == 400* && $out == *"not valid JSON"* ]] || fail "malformed JSON: $out"
out=$(http POST /v1/completions '{"prompt": "x", "max_tokens": 1E400}')
[[ $out == 400* && $out == *"not valid JSON"* ]] || fail "a number beyond double: $out"
out=$(http POST /v1/completions '{"prompt": "x", "max_tokens": 1, "seed": 18446744073709551615}')
[[ $out == 400* && $out == *"'seed' must be between"* ]] || fail "a seed beyond 64 signed bits: $out"
out=$(http POST /v1/completions '{"prompt": "x", "max_tokens": 1, "seed": 9223372036854775807}')
[[ $out == 200* ]] || fail "the largest seed: $out"
out=$(http POST /v1/completions '{"prompt": "x", "max_tokens": 0}')
[[ $out == 400* && $out == *"'max_tokens' must be between 1"* ]] || fail "max_tokens 0: $out"
out=$(http POST /v1/completions '{"prompt": 42}')
[[ $out == 400* && $out == *"'prompt' must be"* ]] || fail "wrong type: $out"
out=$(http POST /v1/completions '{"prompt": "Hello", "max_tokens": 100000}')
[[ $out == 400* && $out == *"context of 1024 tokens"* ]] || fail "huge max_tokens: $out"
out=$(http POST /v1/completions '{"prompt": "Hello", "n": 129}')
[[ $out == 400* && $out == *"'n' must be between 1 and 128"* ]] || fail "n 129: $out"
# n choices: each an engine request; seeded, choice i is what a single request with seed + i
# gives (vLLM's seeds); the prompt counted once in the usage, the completions summed.
out=$(http POST /v1/completions '{"prompt": "Hello", "n": 3, "max_tokens": 5, "temperature": 1, "seed": 40}')
singles=()
for seed in 40 41 42; do
  singles+=("$(completion_text "$(http POST /v1/completions \
    "{\"prompt\": \"Hello\", \"max_tokens\": 5, \"temperature\": 1, \"seed\": $seed}")")")
done
tokens=$(http POST /tokenize '{"prompt": "Hello"}')
python3 - "$out" "${singles[@]}" "${tokens#200 }" <<'PY' || fail "n = 3: $out / ${singles[*]}"
import json, sys
status, body = sys.argv[1].split(" ", 1)
r = json.loads(body)
assert status == "200" and [c["index"] for c in r["choices"]] == [0, 1, 2], r
assert [c["text"] for c in r["choices"]] == sys.argv[2:5], (r["choices"], sys.argv[2:5])
assert r["usage"]["completion_tokens"] == 15, r["usage"]
assert r["usage"]["prompt_tokens"] == len(json.loads(sys.argv[5])["tokens"]), r["usage"]
PY
# Streamed chat with n = 2: each choice's role delta, text and finish chunk under its index, then
# one usage chunk and [DONE].
python3 - "$port" <<'PY' || fail "a streamed chat with n = 2"
import http.client, json, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=60)
c.request("POST", "/v1/chat/completions", headers={"Content-Type": "application/json"}, body=json.dumps({
    "messages": [{"role": "user", "content": "Hi"}], "n": 2, "max_tokens": 4, "temperature": 0,
    "stream": True, "stream_options": {"include_usage": True}}))
r = c.getresponse()
events = [l[6:] for l in r.read().decode().split("\n") if l.startswith("data: ")]
assert events[-1] == "[DONE]", events
chunks = [json.loads(e) for e in events[:-1]]
assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 8, chunks[-1]
roles = [ch["choices"][0]["index"] for ch in chunks[:-1] if ch["choices"][0]["delta"].get("role") == "assistant"]
finishes = [ch["choices"][0]["index"] for ch in chunks[:-1] if ch["choices"][0]["finish_reason"]]
assert sorted(roles) == [0, 1] and sorted(finishes) == [0, 1], (roles, finishes)
text = {i: "".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks[:-1] if ch["choices"][0]["index"] == i)
        for i in (0, 1)}
assert text[0] == text[1] and text[0], text  # greedy: the same answer twice
assert len({ch["id"] for ch in chunks}) == 1
PY
out=$(http POST /v1/completions '{"prompt": "Hello", "max_tokens": 2, "frequency_penalty": 2.5}')
[[ $out == 400* && $out == *"'frequency_penalty' must be between -2"* ]] || fail "frequency_penalty 2.5: $out"
out=$(http POST /v1/completions '{"prompt": "Hello", "max_tokens": 2, "repetition_penalty": 0}')
[[ $out == 400* && $out == *'"param":"repetition_penalty"'* ]] || fail "repetition_penalty 0: $out"
out=$(http POST /v1/completions \
  '{"prompt": "Hello", "max_tokens": 2, "presence_penalty": 1, "frequency_penalty": -1, "repetition_penalty": 1.3}')
[[ $out == 200* ]] || fail "penalties: $out"
out=$(http POST /v1/completions '{"prompt": "Hello", "max_tokens": 1, "logit_bias": {"abc": 1}}')
[[ $out == 400* && $out == *"'logit_bias' keys are token ids"* ]] || fail "logit_bias key: $out"
out=$(http POST /v1/completions '{"prompt": "Hello", "max_tokens": 1, "logit_bias": {"5": 101}}')
[[ $out == 400* && $out == *"from -100 to 100"* ]] || fail "logit_bias value: $out"
out=$(http POST /v1/completions '{"prompt": "Hello", "max_tokens": 1, "logit_bias": {"99999": 1}}')
[[ $out == 400* && $out == *"outside the vocabulary"* ]] || fail "logit_bias token: $out"
out=$(http POST /detokenize '{"tokens": [7, 7, 7]}')
forced=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1].split(" ",1)[1])["prompt"])' "$out")
out=$(http POST /v1/completions '{"prompt": [5, 6], "max_tokens": 3, "temperature": 0, "logit_bias": {"7": 100}}')
[[ $out == 200* && "$(completion_text "$out")" = "$forced" ]] || fail "logit_bias +100 did not force token 7: $out"
out=$(http POST /v1/chat/completions '{"messages": []}')
[[ $out == 400* && $out == *"'messages'"* ]] || fail "empty messages: $out"
out=$(http GET /v1/completions '')
[[ $out == 405* ]] || fail "GET on a POST route: $out"
out=$(http GET /nowhere '')
[[ $out == 404* ]] || fail "unknown route: $out"
out=$(python3 - "$port" <<'PY'
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=60)
body = b'{"prompt": "' + b"x" * (40 << 20) + b'"}'
try:
    c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    print(c.getresponse().status)
except (BrokenPipeError, ConnectionResetError):
    print("reset")
PY
)
[ "$out" = 413 ] || fail "a 40 MiB body: $out"
# Still serving, and the answer is right.
out=$(http POST /v1/completions '{"prompt": "Hello", "max_tokens": 3, "temperature": 0, "ignore_eos": true}')
[[ $out == 200* && $out == *'"completion_tokens":3'* ]] || fail "after the bad requests: $out"
# /metrics parses as Prometheus parses it, with per-model series that saw the request above.
# (Debian's python3-prometheus-client: Debian's interpreter, whatever python3 is first on PATH.)
/usr/bin/python3 - "$port" <<'PY' || fail "/metrics"
import sys, urllib.request
from prometheus_client.parser import text_string_to_metric_families
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=60).read().decode()
families = {f.name: f for f in text_string_to_metric_families(text)}
def value(family, sample, **labels):
    for s in families[family].samples:
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise SystemExit(f"no {sample} {labels} in {family}: {text}")
assert value("optkit:generation_tokens", "optkit:generation_tokens_total", model_name="tiny-base") >= 3
assert value("optkit:generation_tokens", "optkit:generation_tokens_total", model_name="code") >= 1
assert value("optkit:num_requests_running", "optkit:num_requests_running", model_name="code") == 0
assert value("optkit:request_success", "optkit:request_success_total", finished_reason="length") >= 1
assert value("optkit:time_to_first_token_seconds", "optkit:time_to_first_token_seconds_count") >= 1
assert value("optkit:time_to_first_token_seconds", "optkit:time_to_first_token_seconds_bucket", le="+Inf") >= 1
assert value("optkit:inter_token_latency_seconds", "optkit:inter_token_latency_seconds_count") >= 2
assert 0 <= value("optkit:kv_cache_usage_perc", "optkit:kv_cache_usage_perc") <= 1
assert families["optkit:time_to_first_token_seconds"].type == "histogram"
assert value("optkit:delta_resident", "optkit:delta_resident", model_name="code") == 1
assert value("optkit:delta_loads", "optkit:delta_loads_total") >= 2  # code at start, code2 over HTTP
assert value("optkit:delta_resident_bytes", "optkit:delta_resident_bytes") > 0
PY
out=$(http POST /tokenize '{"prompt": "Hello world"}')
[[ $out == 200* && $out == *'"tokens":['* ]] || fail "tokenize: $out"

kill -INT "$server"
wait "$server"
RC=$?
[ "$RC" -eq 130 ] || fail "Ctrl-C: expected exit 130, got $RC: $(cat "$SCRATCH/server.log")"

# The swap-full-model baseline serves the same variant with the same greedy text, swapping models,
# as the decoupled Δ products do on fp32 activations (the default int8 ones may flip a near tie:
# two candidates 0.002 nats apart at the third token of this artifact).
start_serve_deltas "$base" --delta "code=$SCRATCH/code" --delta-activations fp32
out=$(http POST /v1/completions '{"model": "code", "prompt": "def main(", "max_tokens": 6, "temperature": 0}')
decoupled_text=$(completion_text "$out")
kill -TERM "$server"
wait "$server" || fail "SIGTERM: $(cat "$SCRATCH/server.log")"
start_serve_deltas "$base" --delta "code=$SCRATCH/code" --baseline swap
out=$(http POST /v1/completions '{"model": "code", "prompt": "def main(", "max_tokens": 6, "temperature": 0}')
swap_text=$(completion_text "$out")
[ "$swap_text" = "$decoupled_text" ] || fail "--baseline swap: '$swap_text', decoupled: '$decoupled_text'"
out=$(http POST /v1/completions '{"prompt": "Hello", "max_tokens": 2, "temperature": 0}')
[[ $out == 200* ]] || fail "the base after the variant under --baseline swap: $out"
# Without --enable-adapter-loading the adapter routes do not exist.
out=$(http POST /v1/load_lora_adapter "{\"lora_name\": \"c\", \"lora_path\": \"$SCRATCH/code\"}")
[[ $out == 404* ]] || fail "load_lora_adapter without --enable-adapter-loading: $out"
kill -TERM "$server"
wait "$server"
RC=$?
[ "$RC" -eq 0 ] || fail "SIGTERM: expected exit 0, got $RC: $(cat "$SCRATCH/server.log")"
last=$(sql "SELECT MAX(id) FROM runs WHERE command = 'serve-deltas'")
[ "$(sql "SELECT value FROM metrics WHERE run_id = $last AND name = 'model_swaps'")" = 2.0 ] ||
  fail "two swaps (to code, back to the base) not recorded"
[ "$(sql "SELECT COUNT(*) FROM runs WHERE command = 'serve-deltas'")" = 3 ] || fail "serve-deltas runs not archived"
# The first run's summary: the tokens it generated (3 + 6 at least) and its one variant.
first=$(sql "SELECT MIN(id) FROM runs WHERE command = 'serve-deltas'")
generated=$(sql "SELECT value FROM metrics WHERE run_id = $first AND name = 'generated_tokens'")
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 9 else 1)" "${generated:-0}" ||
  fail "generated_tokens of the first server run: '$generated'"
[ "$(sql "SELECT value FROM metrics WHERE run_id = $first AND name = 'variants'")" = 1.0 ] || fail "variants not recorded"

# --enable-prefix-caching: the second request whose prompt starts as the first's takes its cached
# blocks (usage.prompt_tokens_details.cached_tokens, the /metrics counters, the archive) and
# answers the same text; another model's request finds none of the base's blocks.
start_serve_deltas "$base" --delta "code=$SCRATCH/code" --enable-prefix-caching
long=$(printf 'The quick brown fox jumps over the lazy dog. %.0s' 1 2 3 4 5 6)
first_out=$(http POST /v1/completions "{\"prompt\": \"$long\", \"max_tokens\": 6, \"temperature\": 0}")
second_out=$(http POST /v1/completions "{\"prompt\": \"$long\", \"max_tokens\": 6, \"temperature\": 0}")
code_out=$(http POST /v1/completions "{\"model\": \"code\", \"prompt\": \"$long\", \"max_tokens\": 2}")
python3 - "$first_out" "$second_out" "$code_out" <<'PY' || fail "prefix caching: $first_out / $second_out / $code_out"
import json, sys
first, second, code = (json.loads(a.split(" ", 1)[1]) for a in sys.argv[1:])
cached = lambda r: r["usage"]["prompt_tokens_details"]["cached_tokens"]
assert cached(first) == 0 and cached(code) == 0, (first["usage"], code["usage"])
assert 16 <= cached(second) < second["usage"]["prompt_tokens"], second["usage"]
assert cached(second) % 16 == 0, second["usage"]  # whole blocks
assert first["choices"][0]["text"] == second["choices"][0]["text"]
PY
out=$(http GET /metrics)
[[ $out == *'optkit:prefix_cache_hits_total{model_name="'* ]] || fail "/metrics without the prefix cache counters: $out"
# The n choices of one request compute their prompt once: choices 1 and 2 wait for the blocks
# choice 0 computes and take them (a prompt nothing cached starts as).
hits_total() {
  http GET /metrics | python3 -c '
import re, sys
text = sys.stdin.read().split(" ", 1)[1]
print(int(sum(float(v) for v in re.findall(r"^optkit:prefix_cache_hits_total\{[^}]*\} (\S+)$", text, re.M))))'
}
before=$(hits_total)
out=$(http POST /v1/completions "{\"prompt\": \"Numbers: $long\", \"max_tokens\": 2, \"n\": 3, \"temperature\": 1, \"seed\": 5}")
after=$(hits_total)
python3 - "$out" "$before" "$after" <<'PY' || fail "n = 3 with prefix caching: $out (hits $before -> $after)"
import json, sys
status, body = sys.argv[1].split(" ", 1)
assert status == "200", sys.argv[1]
prompt = json.loads(body)["usage"]["prompt_tokens"]
assert int(sys.argv[3]) - int(sys.argv[2]) == 2 * 16 * ((prompt - 1) // 16), (prompt, sys.argv[2:])
PY
out=$(http GET /version)
[[ $out == *'"enable_prefix_caching":true'* ]] || fail "/version: $out"
kill -TERM "$server"
wait "$server" || fail "SIGTERM with prefix caching: exit $?"
last=$(sql "SELECT MAX(id) FROM runs WHERE command = 'serve-deltas'")
hits=$(sql "SELECT value FROM metrics WHERE run_id = $last AND name = 'prefix_cache_hits'")
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 16 else 1)" "${hits:-0}" || fail "prefix_cache_hits: '$hits'"

# Keep-alive clients that send the next request the moment a stream ends (as wrk and load
# generators do) are answered on the same connection every time: the next request can be ready
# before the server has finished with the last write, and the connection must not be dropped
# (before the fix, several of 8 connections were reset within 500 requests).
start_serve_deltas "$base" --mock
python3 - "$port" <<'PY' || fail "back-to-back keep-alive streams"
import socket, sys, threading
port = int(sys.argv[1])
body = b'{"prompt": "Hello there", "max_tokens": 4, "stream": true, "ignore_eos": true}'
request = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
    len(body), body)
failures = []
def client(k):
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        for i in range(1500):
            s.sendall(request)
            answer = b""
            while not answer.endswith(b"\r\n0\r\n\r\n"):
                try:
                    piece = s.recv(65536)
                except OSError as e:
                    piece, answer = b"", answer + repr(e).encode()
                if not piece:
                    failures.append(f"connection {k}, request {i}: {answer[-200:]!r}")
                    return
                answer += piece
            if not answer.startswith(b"HTTP/1.1 200") or b"data: [DONE]" not in answer:
                failures.append(f"connection {k}, request {i}: {answer[:200]!r}")
                return
threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not failures, failures[:3]
PY
kill -TERM "$server"
wait "$server" || fail "SIGTERM after the keep-alive clients: exit $?"

# A second SIGTERM during the shutdown grace skips the rest of it (a 10-minute grace and a
# stream that would take as long: the test's deadline is far shorter than either).
start_serve_deltas "$base" --mock --mock-step-ms 1000 --shutdown-grace 600
# A client that leaves a stream of n = 4 choices aborts four requests, as /metrics counts them.
python3 - "$port" <<'PY' || fail "an aborted n=4 stream in /metrics"
import http.client, socket, sys, time, urllib.request
port = int(sys.argv[1])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
c.request("POST", "/v1/completions", body=b'{"prompt": "Hi", "max_tokens": 600, "n": 4, "stream": true}',
          headers={"Content-Type": "application/json"})
r = c.getresponse()
r.fp.readline()
c.sock.shutdown(socket.SHUT_RDWR)
c.close()
deadline = time.time() + 60
while True:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60).read().decode()
    line = [l for l in text.splitlines() if l.startswith("optkit:request_success_total") and 'finished_reason="abort"' in l]
    if line and float(line[0].split()[-1]) == 4:
        break
    assert time.time() < deadline, line
    time.sleep(0.05)
PY
python3 - "$port" >"$SCRATCH/stream.out" 2>&1 <<'PY' &
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=900)
c.request("POST", "/v1/completions", body=b'{"prompt": "Hi", "max_tokens": 600, "stream": true, "ignore_eos": true}',
          headers={"Content-Type": "application/json"})
r = c.getresponse()
print(r.status, flush=True)
r.read()
PY
client=$!
wait_for_file_text "$SCRATCH/stream.out" "200"
kill -TERM "$server"
wait_for_file_text "$SCRATCH/server.log" "stopping (signal 15)"
kill -TERM "$server"
for _ in $(seq 1 3000); do kill -0 "$server" 2>/dev/null || break; sleep 0.02; done
kill -0 "$server" 2>/dev/null && fail "a second SIGTERM did not cut the 600 s grace short: $(cat "$SCRATCH/server.log")"
wait "$server" || fail "two SIGTERMs: exit $?"
kill "$client" 2>/dev/null || true

run serve-deltas --base "$SCRATCH/nowhere"
expect_rc 2
expect_err_has "--base $SCRATCH/nowhere: no such model folder"
run serve-deltas --base "$base" --kv-cache-memory lots
expect_rc 2
expect_err_has "--kv-cache-memory 'lots'"
# --max-memory: the KV cache gets what is left of it; a budget that leaves nothing, or less than
# --kv-cache-memory, is refused at start with what it needs.
start_serve_deltas "$base" --max-memory 200MiB
kv_bytes=$(http GET /version | python3 -c 'import json,sys; print(json.loads(sys.stdin.read().split(" ",1)[1])["engine"]["kv_cache_bytes"])')
weights=$(du -b "$base/model.safetensors" | cut -f1)
[ "$kv_bytes" -gt 0 ] && [ $((kv_bytes + weights)) -lt $((200 << 20)) ] ||
  fail "--max-memory 200MiB left a KV cache of $kv_bytes bytes beside $weights bytes of weights"
kill -TERM "$server" && wait "$server" || true
run serve-deltas --base "$base" --port 0 --max-memory 100MiB
expect_rc 2
expect_err_has "--max-memory 105 MB: serve-deltas needs"
expect_err_has "before any KV cache; raise --max-memory"
run serve-deltas --base "$base" --port 0 --max-memory 300MiB --kv-cache-memory 1GiB
expect_rc 2
expect_err_has "or lower --kv-cache-memory"
run serve-deltas --base "$base" --baseline merged
expect_rc 2
expect_err_has "--baseline"
run serve-deltas --base "$base" --lora "x=$SCRATCH/code" --port 0
expect_rc 2
expect_err_has "--lora x=$SCRATCH/code: no adapter_config.json"
run serve-deltas --base "$base" --device gpu0 --port 0
expect_rc 2
expect_err_has "--device 'gpu0': expected cpu, cuda or cuda:N"
if ! nvidia-smi -L > /dev/null 2>&1; then
  # No GPU here: asking for one is a runtime failure (exit 3) that says so.
  run serve-deltas --base "$base" --device cuda --port 0
  expect_rc 3
  expect_err_has "cannot serve on CUDA device 0"
fi
run serve-deltas --base "$base" --delta code
expect_rc 2
expect_err_has "--delta 'code': expected NAME=DIR"
run serve-deltas --base "$OPTKIT_SOURCE_DIR/testdata/models/tiny-quotes" --delta "code=$SCRATCH/code" --port 0
expect_rc 2
expect_err_has "different base"
