#!/usr/bin/env bash
# The GPU checks of a session lent a device (/work/.library/device/README.md), prepared so they
# take one call:
#   tests/perf/gpu_checks.sh pack [run|load]  here, after a CUDA build in build/ (cmake -DOPTKIT_CUDA=ON
#                                   -DCMAKE_CUDA_ARCHITECTURES=90 -DOPTKIT_TESTS=ON
#                                   -DOPTKIT_PERF=ON): strips and compresses the
#                                   binaries below into .devrun/ (ignored by .git/info/exclude)
#   tests/perf/gpu_checks.sh run    there, from the repository root, with .devrun carried: unpacks,
#                                   then runs the CUDA tests, the whole decoder step at Llama-3.1-8B's
#                                   shape (perf_decoder_cuda), a served stream with --device cuda,
#                                   the engine at Llama-3.2-1B's shape on the device, and
#                                   compute-sanitizer on the tests; one log per step under $OUT (or
#                                   /tmp/gpu).
#   tests/perf/gpu_checks.sh load   there, likewise: perf_deltazip from 60 to 1000 req/s.
# The binaries find testdata/ and each other by the absolute paths they were built with, so `run`
# links this checkout there when the paths differ.
set -uo pipefail
cd "$(dirname "$0")/../.."
# What each check needs (the tree and .devrun travel within 64 MiB: pack only one set).
run_binaries=(optkit optkit_tests perf_decoder_cuda perf_engine)
load_binaries=(optkit perf_deltazip)
binaries=("${run_binaries[@]}")
[ "${2:-run}" = load ] && binaries=("${load_binaries[@]}")

pack() {
  set -e
  rm -rf .devrun
  mkdir -p .devrun/bin .devrun/lib
  grep -qx '/.devrun/' .git/info/exclude || echo '/.devrun/' >> .git/info/exclude
  for b in "${binaries[@]}"; do
    strip -o ".devrun/bin/$b" "build/$b"
  done
  # The shared libraries the binaries link beyond the C/C++ runtime, as this machine resolves them:
  # the device image is not Debian, so it may lack them or hold other versions.
  ldd "${binaries[@]/#/build/}" | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*|libcuda)\.so' |
    xargs -r cp -L -t .devrun/lib
  sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' build/CMakeCache.txt > .devrun/source_dir
  xz -9 -T2 .devrun/bin/* .devrun/lib/*
  du -sh .devrun
}

# step NAME SECONDS COMMAND...: runs it for at most SECONDS with its output in $out/NAME.log, prints
# a line with its exit status (124: it ran out of time).
step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  if [ "$(type -t "$1")" = function ]; then
    "$@" > "$out/$name.log" 2>&1 # bounds its own waits
  else
    timeout -k 5 "$limit" "$@" > "$out/$name.log" 2>&1
  fi
  local rc=$?
  printf '%-28s rc=%d  %3d s\n' "$name" "$rc" $((SECONDS - t0))
  tail -n 6 "$out/$name.log" | sed 's/^/    /'
  return 0
}

# serve_stream [MODEL [FLAGS...]]: a streamed chat completion for MODEL (default tiny-base) from
# serve-deltas --device cuda FLAGS (python3 as the client: the device image has no curl), then
# SIGTERM.
serve_stream() {
  local model=${1:-tiny-base}
  shift || true
  local port=18123 log=/tmp/serve-deltas.server.log # $OUT brings back at most 8 files
  timeout -k 5 90 build/optkit serve-deltas --base testdata/models/tiny-base --device cuda --port "$port" "$@" \
    > "$log" 2>&1 &
  local pid=$!
  python3 - "$port" "$model" << 'PY'
import json, sys, time, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}"
for _ in range(150):
    try:
        urllib.request.urlopen(base + "/health", timeout=1)
        break
    except Exception:
        time.sleep(0.2)
print(urllib.request.urlopen(base + "/version", timeout=10).read().decode())
body = {"model": sys.argv[2], "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16, "stream": True}
request = urllib.request.Request(base + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
lines = [l.decode().strip() for l in urllib.request.urlopen(request, timeout=60) if l.strip()]
print("\n".join(lines[-3:]))
sys.exit(0 if lines and lines[-1] == "data: [DONE]" else 1)
PY
  local client=$?
  kill -TERM "$pid"
  wait "$pid"
  local server=$?
  echo "client exit $client, server exit $server"
  cat "$log"
  [ "$client" = 0 ] && [ "$server" = 0 ]
}

# Unpacks the binaries and points them at this checkout, the libraries and cuBLASLt.
setup() {
  out=${OUT:-/tmp/gpu}
  mkdir -p "$out"
  local source_dir
  source_dir=$(cat .devrun/source_dir)
  if [ "$(realpath "$source_dir" 2> /dev/null)" != "$(pwd -P)" ]; then
    if ! mkdir -p "$(dirname "$source_dir")" || ! ln -sfn "$(pwd -P)" "$source_dir"; then
      echo "cannot link this checkout at $source_dir" >&2
      exit 1
    fi
  fi
  mkdir -p build .devrun/libs
  for b in $(cd .devrun/bin && ls | sed 's/\.xz$//'); do
    xz -dc ".devrun/bin/$b.xz" > "build/$b" && chmod +x "build/$b"
  done
  for l in .devrun/lib/*.xz; do
    xz -dc "$l" > ".devrun/libs/$(basename "$l" .xz)"
  done
  export LD_LIBRARY_PATH=$PWD/.devrun/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if [ -z "${OPTKIT_CUBLASLT:-}" ] && [ ! -e /usr/local/cuda/lib64/libcublasLt.so.13 ]; then
    OPTKIT_CUBLASLT=$(find / -name 'libcublasLt.so.1[23]' -not -path '/proc/*' 2> /dev/null | head -n 1)
    export OPTKIT_CUBLASLT
  fi
  nvidia-smi -L
  echo "cuBLASLt: ${OPTKIT_CUBLASLT:-/usr/local/cuda/lib64}; unresolved libraries: $(ldd build/* | grep -c 'not found')"
}

run() {
  setup
  # Most telling first, so a run cut short by its limit still says what matters.
  local tests='--source-file=*test_cuda_device_linears.cpp,*test_cuda_paged_attention.cpp,*test_runtime_device_engine.cpp'
  step cuda_tests 90 build/optkit_tests "$tests"
  step perf_decoder_cuda 150 build/perf_decoder_cuda
  step serve_stream 60 serve_stream
  step perf_engine_cuda 100 build/perf_engine 16 16 BF16 cuda
  if command -v compute-sanitizer > /dev/null; then
    step memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 1 build/optkit_tests "$tests"
  fi
}

# DeltaZip's comparison as the load grows past the rate where both ways keep up (at 20 req/s
# throughput only says the trace's offered load), on the GPU and, at 150 and 1000 req/s, the CPU.
load() {
  setup
  step perf_deltazip_cuda_60 150 build/perf_deltazip --requests 600 --rates 60 --popularity zipf-1.5 --threads 16 --device cuda
  step serve_stream_code 100 serve_stream code --delta code=/tmp/perf_deltazip/code # made by perf_deltazip
  step perf_deltazip_cuda_high 300 build/perf_deltazip --requests 1200 --rates 150,400,1000 --popularity zipf-1.5 --threads 16 --device cuda
  step perf_deltazip_cpu 300 build/perf_deltazip --requests 1200 --rates 150,1000 --popularity zipf-1.5 --threads 16 --device cpu
}

case "${1:-}" in
pack) pack ;;
run) run ;;
load) load ;;
*)
  echo "usage: tests/perf/gpu_checks.sh pack|run|load" >&2
  exit 2
  ;;
esac
