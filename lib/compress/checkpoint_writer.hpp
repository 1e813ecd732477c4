// Writes a compressed model as a Hugging Face folder in the compressed-tensors format vLLM loads:
// config.json with `quantization_config`, safetensors holding, per compressed linear layer,
//   int-quantized    <P>.weight I8 [out, in] + <P>.weight_scale [out, 1]
//   pack-quantized   <P>.weight_packed I32 [out, ceil(in·bits/32)] + <P>.weight_scale [out, groups]
//                    + <P>.weight_shape I64 [2]
//   float-quantized  <P>.weight F8_E4M3 [out, in] + <P>.weight_scale [out, 1]
// (scales in the model's dtype), every other tensor as it was (norms with SmoothQuant folded in),
// the tokenizer files, recipe.yaml and compression_report.json.
#pragma once

#include "compress/layerwise.hpp"
#include "compress/recipe.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

namespace optkit::compress {

// Writes into `directory` (which must exist and be empty). Returns the bytes of safetensors written.
std::uint64_t write_compressed_checkpoint(const std::filesystem::path& directory, const std::filesystem::path& source,
                                          const Recipe& recipe, const LayerwiseResult& result,
                                          const nlohmann::json& report);

// The tokenizer and generation files a model folder carries beside its weights.
void copy_tokenizer_files(const std::filesystem::path& from, const std::filesystem::path& to);

// Bytes of a folder's *.safetensors files.
std::uint64_t safetensors_bytes(const std::filesystem::path& directory);

} // namespace optkit::compress
