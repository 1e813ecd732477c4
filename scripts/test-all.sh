#!/usr/bin/env bash
# Builds optkit and runs every test: the clang-format check, a Release build with warnings as
# errors and its full suite, the same suite under AddressSanitizer + UndefinedBehaviorSanitizer
# (built with the portable CPU kernels, so both kernel paths pass the suite),
# and each libFuzzer target for OPTKIT_FUZZ_SECONDS (default 60) seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
fuzz_seconds=${OPTKIT_FUZZ_SECONDS:-60}

step() { printf '\n== %s\n' "$*"; }

step "clang-format"
git ls-files -z '*.cpp' '*.hpp' '*.cu' '*.cuh' | xargs -0 clang-format --dry-run --Werror

step "Release build (-Werror) and tests"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DOPTKIT_WERROR=ON
cmake --build build
cmake --build build --target optkit_graph # the lib/ layering: no cycle, no undeclared edge
ctest --test-dir build -j"$jobs" --output-on-failure

step "ASan+UBSan Debug build and tests"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DOPTKIT_SANITIZE=ON -DOPTKIT_WERROR=ON \
  -DOPTKIT_PORTABLE_KERNELS=ON # the portable kernels, so the suite runs both paths
cmake --build build-asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure

step "libFuzzer targets, ${fuzz_seconds}s each"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOPTKIT_FUZZ=ON \
  -DOPTKIT_TESTS=OFF -DOPTKIT_CUDA=OFF
fuzz_targets=(config_yaml time_point worker_spec safetensors_header tokenizer pre_tokenizer chat_template perf_table sse
              hf_config delta_artifact openai_request lora_adapter bench_inputs eval_inputs tune_inputs engine_metrics
              cluster_yaml)
cmake --build build-fuzz --target "${fuzz_targets[@]/#/fuzz_}"
for target in "${fuzz_targets[@]}"; do
  corpus=$(mktemp -d)
  cp tests/fuzz/corpus/"$target"/* "$corpus"/
  log="build-fuzz/fuzz_$target.log"
  if ! build-fuzz/fuzz_"$target" -max_total_time="$fuzz_seconds" -max_len=4096 -artifact_prefix=build-fuzz/ \
    "$corpus" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz_$target found a failure; the input is saved under build-fuzz/" >&2
    exit 1
  fi
  echo "fuzz_$target: $(grep -E '^Done' "$log")"
  rm -rf "$corpus"
done

step "all tests passed"
