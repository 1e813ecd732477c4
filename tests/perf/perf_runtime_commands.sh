#!/usr/bin/env bash
# Wall time of the commands that run on the CPU runtime's prefill — eval perplexity and compress's
# layer-wise calibration — for two optkit binaries side by side in one run (before and after a
# runtime change), on tiny-base and on a random-weight Llama-3.2-1B-shaped BF16 model with
# tiny-base's tokenizer. Prints seconds per command, after ÷ before, and each perplexity (the two
# binaries must agree). Run by hand, never in CI:
#   tests/perf/perf_runtime_commands.sh BEFORE_OPTKIT [AFTER_OPTKIT] [THREADS]
# (AFTER defaults to build/optkit, THREADS to every core). The 1B model is the one build/perf_runtime
# writes (MODEL_1B, default /tmp/optkit-perf-models/llama-3.2-1b-BF16); run
# `build/perf_runtime --dtype BF16 --batches 1` once to create it.
set -euo pipefail
before=$(realpath "${1:?usage: perf_runtime_commands.sh BEFORE_OPTKIT [AFTER_OPTKIT] [THREADS]}")
after=$(realpath "${2:-build/optkit}")
threads=${3:-0}
root=$(cd "$(dirname "$0")/../.." && pwd)
model_1b=${MODEL_1B:-/tmp/optkit-perf-models/llama-3.2-1b-BF16}
[[ -f "$model_1b/model.safetensors" ]] || {
  echo "no $model_1b/model.safetensors: run build/perf_runtime --dtype BF16 --batches 1 first" >&2
  exit 2
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPTKIT_ARCHIVE="$work/archive.db"
tiny="$root/testdata/models/tiny-base"
big="$work/llama-1b"
mkdir "$big"
cp "$model_1b/config.json" "$tiny/tokenizer.json" "$tiny/tokenizer_config.json" "$big/"
ln -s "$model_1b/model.safetensors" "$big/model.safetensors"
heldout="$root/testdata/corpora/english.heldout.txt"
calib="$root/testdata/corpora/english.calib.txt"

# seconds BINARY ARGS... -> wall seconds of one run (its stdout kept in $work/out)
seconds() {
  local binary=$1 start end
  shift
  start=$(date +%s.%N)
  "$binary" "$@" --threads "$threads" >"$work/out" 2>"$work/err" || {
    cat "$work/err" >&2
    exit 3
  }
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}
perplexity() { python3 -c 'import json,sys; print("%.4f" % json.load(open(sys.argv[1]))["perplexity"])' "$work/out"; }

printf '%-44s %10s %10s %8s   %s\n' "command" "before s" "after s" "after/before" "perplexity before / after"
compare() { # LABEL KIND ARGS... (KIND: ppl or compress)
  local label=$1 kind=$2 t_before t_after p_before="" p_after=""
  shift 2
  if [[ $kind == ppl ]]; then
    t_before=$(seconds "$before" eval perplexity "$@" --format json)
    p_before=$(perplexity)
    t_after=$(seconds "$after" eval perplexity "$@" --format json)
    p_after=$(perplexity)
  else
    t_before=$(seconds "$before" compress "$@" -o "$work/c-before" --format json)
    t_after=$(seconds "$after" compress "$@" -o "$work/c-after" --format json)
    rm -rf "$work/c-before" "$work/c-after"
  fi
  printf '%-44s %10.2f %10.2f %8.2fx   %s\n' "$label" "$t_before" "$t_after" "$(echo "$t_after / $t_before" | bc -l)" \
    "${p_before:+$p_before / $p_after}"
}

compare "eval perplexity tiny-base ctx 128" ppl --model "$tiny" --data "$heldout" --ctx 128
compare "compress int_w4a16 tiny-base 64 x 128" compress --model "$tiny" --recipe int_w4a16 --calib "$calib" \
  --samples 64 --seq-len 128
compare "eval perplexity 1B BF16 ctx 128, 16 windows" ppl --model "$big" --data "$heldout" --ctx 128 --max-windows 16
compare "compress int_w4a16 1B BF16 8 x 128" compress --model "$big" --recipe int_w4a16 --calib "$calib" \
  --samples 8 --seq-len 128
