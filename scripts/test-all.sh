#!/usr/bin/env bash
# Builds optkit and runs every test: the clang-format check, a Release build with warnings as
# errors and its full suite, then one clang build with AddressSanitizer + UndefinedBehaviorSanitizer
# (the portable CPU kernels, so both kernel paths pass the suite; -O1 so the numeric tests finish)
# that runs the same suite and each libFuzzer target for OPTKIT_FUZZ_SECONDS (default 60) seconds,
# one target per core at a time. The CUDA code and the benchmark programs are compiled by the
# Release build only.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
fuzz_seconds=${OPTKIT_FUZZ_SECONDS:-60}

started=$SECONDS
step() { printf '\n== %s (at %d s)\n' "$*" $((SECONDS - started)); }

step "clang-format"
git ls-files -z '*.cpp' '*.hpp' '*.cu' '*.cuh' | xargs -0 clang-format --dry-run --Werror

step "Release build (-Werror) and tests"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DOPTKIT_WERROR=ON
cmake --build build
cmake --build build --target optkit_graph # the lib/ layering: no cycle, no undeclared edge
ctest --test-dir build -j"$jobs" --output-on-failure

step "ASan+UBSan clang build (tests and fuzz targets) and tests"
CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
  -DCMAKE_C_FLAGS_DEBUG="-O1 -g" -DOPTKIT_SANITIZE=ON -DOPTKIT_FUZZ=ON -DOPTKIT_CUDA=OFF -DOPTKIT_PERF_PROGRAMS=OFF \
  -DOPTKIT_PORTABLE_KERNELS=ON # the portable kernels, so the suite runs both paths
cmake --build build-asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure

step "libFuzzer targets, ${fuzz_seconds}s each, $jobs at a time"
fuzz_targets=(config_yaml time_point worker_spec safetensors_header tokenizer pre_tokenizer chat_template perf_table sse
              hf_config delta_artifact openai_request lora_adapter bench_inputs eval_inputs tune_inputs engine_metrics
              cluster_yaml flow_job)
fuzz_one() { # target -> 0 when the fuzzer ran its time without a finding
  local target=$1 corpus log
  corpus=$(mktemp -d)
  cp tests/fuzz/corpus/"$target"/* "$corpus"/
  log="build-asan/fuzz_$target.log"
  if ! build-asan/fuzz_"$target" -max_total_time="$fuzz_seconds" -max_len=4096 -artifact_prefix=build-asan/ \
    "$corpus" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz_$target found a failure; the input is saved under build-asan/" >&2
    rm -rf "$corpus"
    return 1
  fi
  echo "fuzz_$target: $(grep -E '^Done' "$log")"
  rm -rf "$corpus"
}
export -f fuzz_one
export fuzz_seconds
printf '%s\n' "${fuzz_targets[@]}" | xargs -P "$jobs" -I{} bash -c 'fuzz_one {}'

step "all tests passed"
