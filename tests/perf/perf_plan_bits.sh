#!/usr/bin/env bash
# Does the plan's bit allocation beat the same bits placed elsewhere? For each tiny model: plan
# hetero (variance indicator from the model's weights and its calibration corpus, θ given) picks
# bits per layer; compress --plan writes that model; every other placement of the same bits (all
# distinct permutations: the same average bitwidth at other layers) and uniform bitwidths around
# the plan's average are compressed the same way; eval perplexity scores each on the held-out
# corpus. (The tiny models' layers cost almost the same at any bitwidth, so θ is small: it is the
# seconds of batch latency one unit of normalised indicator is worth.) Run by hand, never in CI:
#   tests/perf/perf_plan_bits.sh [OPTKIT] [THETAS] [RECIPE]
# (defaults build/optkit, 0.0001,0.0002,0.0005,0.001, w4a16_rtn); each θ whose plan mixes bitwidths
# is compared, a plan with one bitwidth everywhere is listed and skipped.
set -euo pipefail
optkit=$(realpath "${1:-build/optkit}")
thetas=${2:-0.0001,0.0002,0.0005,0.001}
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
    --seq-len 128 --plan "$dir.json" -o "$dir" >/dev/null 2>&1
  "$optkit" eval perplexity --model "$dir" --data "$root/testdata/corpora/$2.heldout.txt" --ctx 128 --format json 2>/dev/null |
    python3 -c 'import json,sys; print("%.4f" % json.load(sys.stdin)["perplexity"])'
  rm -rf "$dir" "$dir.json"
}

printf '%-13s %-8s %-9s %-12s %9s  %s\n' model corpus theta placement ppl bits
for pair in tiny-base:english tiny-code:code tiny-quotes:quotes; do
  model="$root/testdata/models/${pair%%:*}"
  corpus=${pair##*:}
  for theta in ${thetas//,/ }; do
    "$optkit" plan hetero --cluster "$work/cluster.yaml" --model "$model" --isl 128 --osl 32 --batch 8 \
      --theta "$theta" --calib "$root/testdata/corpora/$corpus.calib.txt" --calib-samples 16 --calib-length 128 \
      --format json -o "$work/plan.json" >/dev/null 2>&1
    bits=$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["layer_bits"])))' \
      "$work/plan.json")
    if [ "$(tr ',' '\n' <<<"$bits" | sort -u | wc -l)" -lt 2 ]; then
      printf '%-13s %-8s %-9s %-12s %9s  [%s]\n' "${pair%%:*}" "$corpus" "$theta" "plan (one bitwidth: skipped)" "" "$bits"
      continue
    fi
    plan_ppl=$(ppl "$model" "$corpus" "$bits")
    printf '%-13s %-8s %-9s %-12s %9s  [%s]\n' "${pair%%:*}" "$corpus" "$theta" plan "$plan_ppl" "$bits"
    placed=()
    others=()
    while read -r line; do [ -n "$line" ] && others+=("$line"); done < <(python3 - "$bits" <<'PY'
import itertools, sys
plan = tuple(map(int, sys.argv[1].split(",")))
for p in sorted(set(itertools.permutations(plan)) - {plan}):
    print(",".join(map(str, p)))
avg = sum(plan) / len(plan)
options = sorted(set(plan))
below = max(b for b in options if b <= avg)
above = min(b for b in options if b >= avg)
for b in sorted({below, above}):
    print("uniform:" + ",".join([str(b)] * len(plan)))
PY
    )
    for o in "${others[@]}"; do
      label=permutation
      [[ $o == uniform:* ]] && label=uniform && o=${o#uniform:}
      value=$(ppl "$model" "$corpus" "$o")
      [ "$label" = permutation ] && placed+=("$value")
      printf '%-13s %-8s %-9s %-12s %9s  [%s]\n' "${pair%%:*}" "$corpus" "$theta" "$label" "$value" "$o"
    done
    python3 - "$plan_ppl" "${placed[@]}" <<'PY'
import sys
plan, others = float(sys.argv[1]), [float(v) for v in sys.argv[2:]]
mean = sum(others) / len(others)
rank = 1 + sum(v < plan for v in others)
print(f"  -> the plan ranks {rank} of {len(others) + 1} placements of its bits; the other placements average "
      f"{mean:.4f} ({(plan / mean - 1) * 100:+.2f} % for the plan)")
PY
  done
done
