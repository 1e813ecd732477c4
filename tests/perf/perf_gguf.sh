#!/usr/bin/env bash
# GGUF Q4_K_M against llama.cpp's own (#42's goals), run by hand with a llama.cpp build outside the
# repository (../shared/tools/README.md), never in CI. For each domain model, side by side:
#   - llama.cpp: the BF16 folder converted to an F32 GGUF (to_gguf.py), its importance matrix from
#     llama-imatrix over the domain's calibration text (--ctx 128), llama-quantize Q4_K_M with and
#     without it;
#   - optkit: compress --recipe q4_k_m with --calib (all of it, in llama-imatrix's windows of 128
#     tokens) and without; its importance matrix (--imatrix-out) compared with llama-imatrix's, column
#     by column, and given to llama-quantize too (the same bytes as optkit's file: what remains
#     between the tools is the matrices' difference);
# every file scored by llama-perplexity (--ctx 128, CPU repacking off) and by optkit eval
# perplexity (--ctx 128) on the domain's held-out text. Printed: perplexity in each, ΔPPL % against
# the F32 GGUF in llama-perplexity, optkit's ΔPPL over llama-quantize's (the goal: ≤ 1.05 with an
# importance matrix, ≤ 1.00 without), and how far optkit's perplexity of the file is from
# llama-perplexity's (the goal: within 0.05 %), and from llama-perplexity -fa off: llama.cpp's
# CPU flash attention (its default) sums the attention output in fp16, which alone moves its
# perplexity by up to ~0.09 % on these files; optkit does not round there.
# Then llama.cpp's own spread: its importance matrix again from the same calibration text in other
# windows (llama-imatrix -c 96, 112, 144, and -c 128 skipping the first window), each quantized
# and scored the same way. Printed: the least, median and largest ΔPPL of llama-quantize's five
# files, and optkit's ΔPPL over their median. On the tiny models these rounding-level changes move
# llama-quantize's own ΔPPL by more than the goal's 5 %, so the median is the steadier reference.
#   LLAMA_CPP_BIN=<llama.cpp>/build/bin GGUF_PY=<llama.cpp>/gguf-py TO_GGUF=../shared/tools/to_gguf.py \
#     tests/perf/perf_gguf.sh [OPTKIT] [MODELS]
# (defaults build/optkit; tiny-code:code,tiny-licenses:licenses,tiny-glosses:glosses)
set -euo pipefail
: "${LLAMA_CPP_BIN:?set LLAMA_CPP_BIN to the bin folder of a llama.cpp build}" "${GGUF_PY:?}" "${TO_GGUF:?}"
optkit=$(realpath "${1:-build/optkit}")
models=${2:-tiny-code:code,tiny-licenses:licenses,tiny-glosses:glosses}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPTKIT_ARCHIVE="$work/archive.db" GGUF_PY

llama_ppl() { # GGUF CORPUS [FLAGS] (llama.cpp's asynchronous log sometimes loses its last line on a
  # busy machine: up to three tries)
  local value=""
  for _ in 1 2 3; do
    # shellcheck disable=SC2086 # FLAGS are words
    "$LLAMA_CPP_BIN/llama-perplexity" -m "$1" -f "$root/testdata/corpora/$2.heldout.txt" -c 128 -t 2 -nr ${3:-} \
      >"$work/perplexity.log" 2>&1
    value=$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' "$work/perplexity.log" | head -1)
    [ -n "$value" ] && break
  done
  echo "$value"
}
optkit_ppl() { # MODEL CORPUS
  "$optkit" eval perplexity --model "$1" --data "$root/testdata/corpora/$2.heldout.txt" --ctx 128 --format json \
    2>/dev/null | python3 -c 'import json,sys; print("%.5f" % json.load(sys.stdin)["perplexity"])'
}

printf '%-14s %-26s %12s %9s %12s %11s %13s\n' model file llama-ppl 'ΔPPL %' optkit-ppl 'optkit-llama' \
  'vs -fa off'
for pair in ${models//,/ }; do
  name=${pair%%:*} corpus=${pair##*:}
  model="$root/testdata/models/$name"
  calib="$root/testdata/corpora/$corpus.calib.txt"
  /usr/bin/python3 "$TO_GGUF" "$model" "$work/$name-f32.gguf" --outtype f32 >/dev/null 2>&1
  "$optkit" --quiet compress --model "$model" --recipe q4_k_m -o "$work/$name-optkit-q4km.gguf" >/dev/null
  # rope_freqs as llama.cpp's converter writes them, which optkit does bit for bit (to_gguf.py
  # computes them in float64: two of the tiny models' 16 come out one ulp off, which alone moves
  # llama-perplexity by ~0.01 %), so both tools quantize the same model.
  /usr/bin/python3 - "$work/$name-f32.gguf" "$work/$name-optkit-q4km.gguf" <<'PY'
import os, sys
sys.path.insert(0, os.environ["GGUF_PY"])
import gguf
def rope(path, mode="r"):
    return next(t for t in gguf.GGUFReader(path, mode).tensors if t.name == "rope_freqs.weight").data
rope(sys.argv[1], "r+")[:] = rope(sys.argv[2])
PY
  "$LLAMA_CPP_BIN/llama-imatrix" -m "$work/$name-f32.gguf" -f "$calib" -c 128 -t 2 -nr \
    -o "$work/$name.imatrix.gguf" >/dev/null 2>&1
  "$LLAMA_CPP_BIN/llama-quantize" "$work/$name-f32.gguf" "$work/$name-llama-q4km.gguf" Q4_K_M >/dev/null 2>&1
  "$LLAMA_CPP_BIN/llama-quantize" --imatrix "$work/$name.imatrix.gguf" "$work/$name-f32.gguf" \
    "$work/$name-llama-q4km-imatrix.gguf" Q4_K_M >/dev/null 2>&1
  "$optkit" --quiet compress --model "$model" --recipe q4_k_m --calib "$calib" --samples 100000 --seq-len 128 \
    -o "$work/$name-optkit-q4km-imatrix.gguf" --imatrix-out "$work/$name.optkit.imatrix.gguf" >/dev/null
  /usr/bin/python3 - "$name" "$work/$name.optkit.imatrix.gguf" "$work/$name.imatrix.gguf" <<'PY'
import os, sys
sys.path.insert(0, os.environ["GGUF_PY"])
import gguf, numpy as np
def means(path):  # weight -> in_sum2 / counts, as llama-quantize reads the file
    t = {x.name: np.array(x.data, dtype=np.float64).ravel() for x in gguf.GGUFReader(path).tensors}
    return {n[:-8]: t[n] / t[n[:-8] + ".counts"][0] for n in t if n.endswith(".in_sum2")}
ours, theirs = means(sys.argv[2]), means(sys.argv[3])
assert ours.keys() == theirs.keys(), (sorted(ours), sorted(theirs))
diff = np.concatenate([np.abs(ours[k] / theirs[k] - 1) for k in theirs])
print(f"{sys.argv[1]:<14} optkit's importance matrix against llama-imatrix's: {len(theirs)} weights, "
      f"{diff.size} columns, relative difference median {np.median(diff):.1e}, largest {diff.max():.1e}")
PY
  # llama-quantize given optkit's matrix: the same tensors, so what remains between the two tools'
  # ΔPPL with an importance matrix is the matrices' own difference.
  "$LLAMA_CPP_BIN/llama-quantize" --imatrix "$work/$name.optkit.imatrix.gguf" "$work/$name-f32.gguf" \
    "$work/$name-llama-q4km-optkit-imatrix.gguf" Q4_K_M >/dev/null 2>&1
  /usr/bin/python3 - "$name" "$work/$name-llama-q4km-optkit-imatrix.gguf" "$work/$name-optkit-q4km-imatrix.gguf" <<'PY'
import os, sys
sys.path.insert(0, os.environ["GGUF_PY"])
import gguf, numpy as np
def tensors(path):
    return {t.name: np.array(t.data).tobytes() for t in gguf.GGUFReader(path).tensors}
theirs, ours = tensors(sys.argv[2]), tensors(sys.argv[3])
same = sum(theirs[n] == ours.get(n) for n in theirs)
print(f"{sys.argv[1]:<14} llama-quantize with optkit's importance matrix: {same} of {len(theirs)} tensors are "
      f"optkit's bytes")
PY
  base=$(llama_ppl "$work/$name-f32.gguf" "$corpus")
  declare -A delta=()
  for file in f32 llama-q4km optkit-q4km llama-q4km-imatrix optkit-q4km-imatrix llama-q4km-optkit-imatrix; do
    value=$(llama_ppl "$work/$name-$file.gguf" "$corpus")
    ours=$(optkit_ppl "$work/$name-$file.gguf" "$corpus")
    delta[$file]=$(python3 -c "print(($value / $base - 1) * 100)")
    plain=$(llama_ppl "$work/$name-$file.gguf" "$corpus" "-fa off")
    printf '%-14s %-26s %12s %9.3f %12s %10.3f%% %12.3f%%\n' "$name" "$file" "$value" "${delta[$file]}" "$ours" \
      "$(python3 -c "print(($ours / $value - 1) * 100)")" "$(python3 -c "print(($ours / $plain - 1) * 100)")"
  done
  printf '%-14s optkit ΔPPL / llama-quantize ΔPPL: %.3f without an importance matrix, %.3f with one\n' "$name" \
    "$(python3 -c "print(${delta[optkit-q4km]} / ${delta[llama-q4km]})")" \
    "$(python3 -c "print(${delta[optkit-q4km-imatrix]} / ${delta[llama-q4km-imatrix]})")"
  spread=("${delta[llama-q4km-imatrix]}")
  for windows in "-c 96" "-c 112" "-c 144" "-c 128 --chunk 1"; do
    # shellcheck disable=SC2086 # the window flags are words
    "$LLAMA_CPP_BIN/llama-imatrix" -m "$work/$name-f32.gguf" -f "$calib" $windows -t 2 -nr \
      -o "$work/$name.other.imatrix.gguf" >/dev/null 2>&1
    "$LLAMA_CPP_BIN/llama-quantize" --imatrix "$work/$name.other.imatrix.gguf" "$work/$name-f32.gguf" \
      "$work/$name-other.gguf" Q4_K_M >/dev/null 2>&1
    spread+=("$(python3 -c "print(($(llama_ppl "$work/$name-other.gguf" "$corpus") / $base - 1) * 100)")")
  done
  python3 - "$name" "${delta[optkit-q4km-imatrix]}" "${spread[@]}" <<'PY'
import statistics, sys
name, ours, *theirs = sys.argv[1], float(sys.argv[2]), *map(float, sys.argv[3:])
median = statistics.median(theirs)
print(f"{name:<14} llama-quantize + llama-imatrix in 5 windowings: ΔPPL {min(theirs):.3f} … {median:.3f} (median) … "
      f"{max(theirs):.3f} %; optkit {ours:.3f} %, {ours / median:.3f} × the median")
PY
done
