// GGUF export: a Hugging Face Llama, Mistral, Qwen2 or Qwen3 folder written as one GGUF file
// llama.cpp loads — the metadata (compress/gguf_metadata.hpp), every tensor under its llama.cpp
// name (in the llama architecture with Q and K rows permuted for NORM RoPE), norms and biases in
// F32, and each matrix quantized to the ggml type the file type's mixture gives it
// (compress/gguf_mixture.hpp), weighted by the importance matrix when there is one. The model
// streams through a block of rows at a time; the file is written in one pass (offsets are known
// from the shapes before any data).
#pragma once

#include "compress/gguf_mixture.hpp"
#include "compress/importance_matrix.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace optkit::compress {

struct GgufExportOptions {
  std::filesystem::path model;
  std::filesystem::path output; // the .gguf file to write
  GgufFileType file_type = GgufFileType::q4_k_m;
  const ImportanceMatrix* importance = nullptr;
  unsigned threads = 0;
};

struct GgufTensorReport {
  std::string name; // GGUF name
  std::string type; // ggml type
  // Σ imp·(w − ŵ)² / Σ imp·w² over the tensor (imp = 1 without an importance matrix).
  double relative_error = 0;
};

struct GgufExportResult {
  std::uint64_t bytes = 0;
  std::vector<GgufTensorReport> tensors; // the quantized ones, in file order
  std::map<std::string, std::int64_t> type_counts;
  double mean_relative_error = 0; // over the decoder layers' linear tensors
};

GgufExportResult export_gguf(const GgufExportOptions& options);

} // namespace optkit::compress
