#!/usr/bin/env bash
# Does the plan's bit allocation beat the same bits placed elsewhere? For each tiny model: plan
# hetero (variance indicator from the model's weights and its calibration corpus, θ given) picks
# bits per layer; compress --plan writes that model; every other placement of the same bits (all
# distinct permutations: the same average bitwidth at other layers) and uniform bitwidths around
# the plan's average are compressed the same way; eval perplexity scores each on the held-out
# corpus. Run by hand, never in CI:
#   tests/perf/perf_plan_bits.sh [OPTKIT] [THETA] [RECIPE]     (default build/optkit 20000 w4a16_rtn)
set -euo pipefail
optkit=$(realpath "${1:-build/optkit}")
theta=${2:-20000}
recipe=${3:-w4a16_rtn}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPTKIT_ARCHIVE="$work/archive.db"
printf 'groups:\n  - {gpu: t4, count: 1, node: a}\n  - {gpu: l4, count: 1, node: b}\n' >"$work/cluster.yaml"

# ppl MODEL_DIR CORPUS BITS_CSV -> perplexity of MODEL compressed at those layer bits
ppl() {
  local dir="$work/m$RANDOM$RANDOM"
  printf '{"layer_bits": [%s]}\n' "$3" >"$dir.json"
  "$optkit" compress --model "$1" --recipe "$recipe" --calib "$root/testdata/corpora/$2.calib.txt" --samples 16 \
    --seq-len 128 --plan "$dir.json" -o "$dir" >/dev/null
  "$optkit" eval perplexity --model "$dir" --data "$root/testdata/corpora/$2.heldout.txt" --ctx 128 --format json |
    python3 -c 'import json,sys; print("%.4f" % json.load(sys.stdin)["perplexity"])'
  rm -rf "$dir" "$dir.json"
}

printf '%-13s %-10s %-12s %9s  %s\n' model corpus placement ppl bits
for pair in tiny-base:english tiny-code:code tiny-quotes:quotes; do
  model="$root/testdata/models/${pair%%:*}"
  corpus=${pair##*:}
  "$optkit" plan hetero --cluster "$work/cluster.yaml" --model "$model" --isl 128 --osl 32 --batch 8 \
    --theta "$theta" --calib "$root/testdata/corpora/$corpus.calib.txt" --calib-samples 16 --calib-length 128 \
    --format json -o "$work/plan.json" >/dev/null
  bits=$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["layer_bits"])))' \
    "$work/plan.json")
  printf '%-13s %-10s %-12s %9s  [%s]\n' "${pair%%:*}" "$corpus" plan "$(ppl "$model" "$corpus" "$bits")" "$bits"
  others=()
  while read -r line; do [ -n "$line" ] && others+=("$line"); done < <(python3 - "$bits" <<'PY'
import itertools, sys
plan = tuple(map(int, sys.argv[1].split(",")))
for p in sorted(set(itertools.permutations(plan)) - {plan}):
    print(",".join(map(str, p)))
avg = sum(plan) / len(plan)
for b in sorted({b for b in (3, 4, 8, 16) if b <= avg} and {max(b for b in (3, 4, 8, 16) if b <= avg),
                 min(b for b in (3, 4, 8, 16) if b >= avg)}):
    print("uniform:" + ",".join([str(b)] * len(plan)))
PY
  )
  for o in "${others[@]}"; do
    label=permutation
    [[ $o == uniform:* ]] && label=uniform && o=${o#uniform:}
    printf '%-13s %-10s %-12s %9s  [%s]\n' "${pair%%:*}" "$corpus" "$label" "$(ppl "$model" "$corpus" "$o")" "$o"
  done
done
