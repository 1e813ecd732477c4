#!/usr/bin/env bash
# Quality of the compressed-tensors schemes side by side (#42's goals): each domain model is
# compressed by every recipe below, and eval perplexity scores it on its domain's held-out text
# (llama-perplexity's protocol, --ctx 128). Printed: perplexity and ΔPPL = ppl / ppl(BF16) − 1,
# in percent, per model and recipe; and, against the BF16 model on the same windows (--kl-base),
# the mean KL divergence per scored token (nats) and top-1 agreement. On these small models ΔPPL
# can move either way by tenths of a percent with the rounding pattern alone; KL divergence is
# never negative and tracks how far the model's predictions moved. Calibrated recipes read the
# model's own domain calibration text (64 samples of 128 tokens). Run by hand, never in CI:
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

# ppl MODEL_DIR CORPUS [BASE_DIR] -> perplexity on the corpus' held-out text [, mean KL and top-1
# agreement against BASE_DIR]
ppl() {
  "$optkit" eval perplexity --model "$1" --data "$root/testdata/corpora/$2.heldout.txt" --ctx 128 --format json \
    ${3:+--kl-base "$3"} 2>/dev/null |
    python3 -c 'import json,sys; d=json.load(sys.stdin); k=d.get("kl")
print("%.5f" % d["perplexity"] + ("" if k is None else " %.5f %.2f" % (k["kl_mean"], 100 * k["top1_agreement"])))'
}

printf '%-14s %-12s %10s %9s %9s %7s\n' model recipe ppl 'ΔPPL %' 'KL nats' 'top-1 %'
for pair in ${models//,/ }; do
  model="$root/testdata/models/${pair%%:*}"
  corpus=${pair##*:}
  base=$(ppl "$model" "$corpus")
  printf '%-14s %-12s %10s %9s %9s %7s\n' "${pair%%:*}" bf16 "$base" 0 0 100
  for recipe in ${recipes//,/ }; do
    out="$work/$recipe-${pair%%:*}"
    "$optkit" compress --model "$model" --recipe "$recipe" --calib "$root/testdata/corpora/$corpus.calib.txt" \
      --samples 64 --seq-len 128 -o "$out" >/dev/null 2>&1
    read -r value kl top1 <<<"$(ppl "$out" "$corpus" "$model")"
    printf '%-14s %-12s %10s %9.3f %9s %7s\n' "${pair%%:*}" "$recipe" "$value" \
      "$(python3 -c "print(($value / $base - 1) * 100)")" "$kl" "$top1"
    rm -rf "$out"
  done
done
