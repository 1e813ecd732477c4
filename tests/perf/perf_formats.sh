#!/usr/bin/env bash
# Quality of the compressed-tensors schemes side by side (#42's goals): each domain model is
# compressed by every recipe below, and eval perplexity scores it on its domain's held-out text
# (llama-perplexity's protocol, --ctx 128). Printed: perplexity and ΔPPL = ppl / ppl(BF16) − 1,
# in percent, per model and recipe. Calibrated recipes read the model's own domain calibration
# text (64 samples of 128 tokens). Run by hand, never in CI:
#   tests/perf/perf_formats.sh [OPTKIT] [RECIPES] [MODELS]
# (defaults build/optkit; fp8_dynamic,fp8_block,int_w4a16,w4a16_rtn,nvfp4,nvfp4a16,mxfp4;
# tiny-code:code,tiny-licenses:licenses,tiny-glosses:glosses)
set -euo pipefail
optkit=$(realpath "${1:-build/optkit}")
recipes=${2:-fp8_dynamic,fp8_block,int_w4a16,w4a16_rtn,nvfp4,nvfp4a16,mxfp4}
models=${3:-tiny-code:code,tiny-licenses:licenses,tiny-glosses:glosses}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPTKIT_ARCHIVE="$work/archive.db"

# ppl MODEL_DIR CORPUS -> perplexity on the corpus' held-out text
ppl() {
  "$optkit" eval perplexity --model "$1" --data "$root/testdata/corpora/$2.heldout.txt" --ctx 128 --format json \
    2>/dev/null | python3 -c 'import json,sys; print("%.5f" % json.load(sys.stdin)["perplexity"])'
}

printf '%-14s %-12s %10s %9s\n' model recipe ppl 'ΔPPL %'
for pair in ${models//,/ }; do
  model="$root/testdata/models/${pair%%:*}"
  corpus=${pair##*:}
  base=$(ppl "$model" "$corpus")
  printf '%-14s %-12s %10s %9s\n' "${pair%%:*}" bf16 "$base" 0
  for recipe in ${recipes//,/ }; do
    out="$work/$recipe-${pair%%:*}"
    "$optkit" compress --model "$model" --recipe "$recipe" --calib "$root/testdata/corpora/$corpus.calib.txt" \
      --samples 64 --seq-len 128 -o "$out" >/dev/null 2>&1
    value=$(ppl "$out" "$corpus")
    printf '%-14s %-12s %10s %9.3f\n' "${pair%%:*}" "$recipe" "$value" \
      "$(python3 -c "print(($value / $base - 1) * 100)")"
    rm -rf "$out"
  done
done
