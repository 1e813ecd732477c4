#!/usr/bin/env bash
# Runs every libFuzzer target of a fuzz build for SECONDS each (default 600), one target per core
# at a time:
#   scripts/fuzz.sh [SECONDS] [BUILD_DIR]     BUILD_DIR: a clang build with -DOPTKIT_FUZZ=ON
#                                              (default build-asan, the one scripts/test-all.sh makes)
# Each target first runs every input of its corpus, tests/fuzz/corpus/<target>/ (the seeds and the
# inputs that found past defects), then mutates for the rest of its time. scripts/test-all.sh runs
# it with a short budget (OPTKIT_FUZZ_SECONDS, default 20) so CI fits its time; run it for hours
# before a release. A finding is saved under BUILD_DIR (crash-*, leak-*, timeout-*) and the script
# exits non-zero; new inputs that reached new coverage stay in a scratch copy, never in the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
build=${2:-build-asan}
jobs=$(nproc)

targets=()
for binary in "$build"/fuzz_*; do
  [[ -x "$binary" && -f "$binary" ]] || continue
  target=${binary##*/fuzz_}
  [ -d "tests/fuzz/corpus/$target" ] || {
    echo "fuzz.sh: fuzz_$target has no corpus: add seed inputs under tests/fuzz/corpus/$target/" >&2
    exit 2
  }
  targets+=("$target")
done
[ ${#targets[@]} -gt 0 ] || {
  echo "fuzz.sh: no fuzz_* targets in $build; build them with CC=clang CXX=clang++ -DOPTKIT_FUZZ=ON" >&2
  exit 2
}

fuzz_one() { # target -> 0 when the fuzzer ran its time without a finding
  local target=$1 corpus log max_len
  corpus=$(mktemp -d)
  cp tests/fuzz/corpus/"$target"/* "$corpus"/
  log="$build/fuzz_$target.log"
  # Inputs up to 4 KiB, or what the corpus's .max_len says (a GGUF model's seeds are 60 KiB).
  max_len=$(cat tests/fuzz/corpus/"$target"/.max_len 2>/dev/null || echo 4096)
  if ! "$build/fuzz_$target" -max_total_time="$seconds" -max_len="$max_len" -artifact_prefix="$build/" \
    "$corpus" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz_$target found a failure; the input is saved under $build/" >&2
    rm -rf "$corpus"
    return 1
  fi
  echo "fuzz_$target: $(grep -E '^Done' "$log")"
  rm -rf "$corpus"
}
export -f fuzz_one
export seconds build
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'fuzz_one {}'
