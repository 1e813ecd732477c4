// Writes a DeltaZip-style compressed delta (format in quant/delta_format.hpp): the compressed Δ of
// every linear layer from the layer-wise pass, the embeddings' and lm_head's Δ pruned 2:4 by
// magnitude and rounded to the same grid (no calibration reaches them), and the variant's norms.
#pragma once

#include "compress/layerwise.hpp"
#include "compress/recipe.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

namespace optkit::compress {

struct DeltaWriteResult {
  std::uint64_t artifact_bytes = 0;     // the tensors file as stored (after zstd when enabled)
  std::uint64_t uncompressed_bytes = 0; // the fine-tuned model in fp16
  double compression_ratio = 0;
};

DeltaWriteResult write_delta_artifact(const std::filesystem::path& directory, const std::filesystem::path& finetuned,
                                      const std::filesystem::path& base, const Recipe& recipe,
                                      const LayerwiseResult& result, nlohmann::json report);

} // namespace optkit::compress
