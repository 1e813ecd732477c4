#!/usr/bin/env bash
# README command (a)'s build, timed side by side for two commits on fresh clones of this checkout:
#   tests/perf/perf_build.sh BASE [HEAD] [-- CMAKE_ARGS...]      (HEAD defaults to HEAD)
# For each commit, in a new clone under $TMPDIR: `cmake -S . -B build -G Ninja` then
# `cmake --build build`, each with its wall time, the number of steps ninja ran and the
# seconds its jobs took, summed from .ninja_log; then the ratio HEAD/BASE. Extra CMAKE_ARGS (say
# -DOPTKIT_TESTS=ON -DOPTKIT_PERF=ON, test-all's Release stage) go to both configures. Run it on
# an otherwise idle machine, or with the same load beside both builds: they run one after the other.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: tests/perf/perf_build.sh BASE [HEAD] [-- CMAKE_ARGS...]" >&2; exit 2; }
base=$1; shift
head=HEAD
if [ $# -ge 1 ] && [ "$1" != "--" ]; then head=$1; shift; fi
[ "${1:-}" = "--" ] && shift
cmake_args=("$@")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

build_seconds() { # build_seconds REV -> "wall steps job-seconds" for a fresh clone's user build
  local dir="$scratch/$1" start end
  git clone -q . "$dir"
  git -C "$dir" checkout -q "$1"
  start=$(date +%s)
  cmake -S "$dir" -B "$dir/build" -G Ninja "${cmake_args[@]}" >/dev/null
  cmake --build "$dir/build" >/dev/null
  end=$(date +%s)
  printf '%d %d %.0f\n' $((end - start)) \
    "$(awk 'NR > 1' "$dir/build/.ninja_log" | wc -l)" \
    "$(awk 'NR > 1 { s += ($2 - $1) / 1000 } END { print s }' "$dir/build/.ninja_log")"
  rm -rf "$dir"
}

read -r base_wall base_targets base_cpu < <(build_seconds "$base")
read -r head_wall head_targets head_cpu < <(build_seconds "$head")
printf '%-12s %10s %8s %14s\n' commit "wall (s)" steps "job-seconds"
printf '%-12s %10d %8d %14d\n' "$(git rev-parse --short "$base")" "$base_wall" "$base_targets" "$base_cpu"
printf '%-12s %10d %8d %14d\n' "$(git rev-parse --short "$head")" "$head_wall" "$head_targets" "$head_cpu"
awk -v hw="$head_wall" -v bw="$base_wall" -v hc="$head_cpu" -v bc="$base_cpu" \
  'BEGIN { printf "HEAD/BASE wall %.2f, job-seconds %.2f\n", hw / bw, hc / bc }'
