#!/usr/bin/env bash
# Builds optkit and runs every test: the clang-format check, a Release build with warnings as
# errors (the binary and the tests) and its full suite, then one clang build with
# AddressSanitizer + UndefinedBehaviorSanitizer (the portable CPU kernels, so both kernel paths
# pass the suite; -O1, and -O2 without fuzzing coverage for the numeric inner loops, see
# lib/CMakeLists.txt, so the numeric tests finish) that runs the same suite and, through
# scripts/fuzz.sh, each libFuzzer target for OPTKIT_FUZZ_SECONDS (default 20) seconds after
# replaying its corpus, one target per core at a time. The CUDA code is compiled by the Release
# build only. The benchmark programs (tests/perf/, -DOPTKIT_PERF=ON) are run by hand and never
# timed here, so this script builds them only when asked (OPTKIT_TEST_PERF=ON; a change to lib/'s
# interfaces should be checked so). The CUDA code is compiled for one architecture here (sm_90, down
# to machine code: what proves it compiles); the user build compiles every architecture it ships.
# The suites run two tests per core: many of them wait on servers, timers and child processes, so
# at one per core a third of the machine sat idle (measured: Release suite 231 s at -j2, 166 s at
# -j4). Needs scripts/install-deps.sh --tests.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
test_jobs=$((2 * jobs))
fuzz_seconds=${OPTKIT_FUZZ_SECONDS:-20}
perf=${OPTKIT_TEST_PERF:-OFF}

started=$SECONDS
step() { printf '\n== %s (at %d s)\n' "$*" $((SECONDS - started)); }

step "clang-format"
git ls-files -z '*.cpp' '*.hpp' '*.cu' '*.cuh' | xargs -0 clang-format --dry-run --Werror

step "Release build (-Werror) and tests"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DOPTKIT_WERROR=ON -DOPTKIT_TESTS=ON -DOPTKIT_PERF="$perf" \
  -DCMAKE_CUDA_ARCHITECTURES=90-real
cmake --build build
cmake --build build --target optkit_graph # the lib/ layering: no cycle, no undeclared edge
ctest --test-dir build -j"$test_jobs" --output-on-failure

step "ASan+UBSan clang build (tests and fuzz targets) and tests"
CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" \
  -DCMAKE_C_FLAGS_DEBUG="-O1 -gline-tables-only" -DOPTKIT_SANITIZE=ON -DOPTKIT_FUZZ=ON -DOPTKIT_CUDA=OFF -DOPTKIT_TESTS=ON \
  -DOPTKIT_PORTABLE_KERNELS=ON # the portable kernels, so the suite runs both paths
cmake --build build-asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -j"$test_jobs" --output-on-failure

step "libFuzzer targets, ${fuzz_seconds}s each, $jobs at a time (each corpus replayed first)"
scripts/fuzz.sh "$fuzz_seconds" build-asan

step "all tests passed"
