// Writes a DeltaZip-style compressed delta (format in quant/delta_format.hpp): the compressed Δ of
// every linear layer from the layer-wise pass, the embeddings' (and an uncalibrated LM head's) Δ
// rounded to the same grid (no calibration reaches them), and the variant's norms.
//
// The writer streams, as the checkpoint writer does: delta.safetensors's layout is fixed from the
// recipe and the two models' shapes before anything is compressed, each Δ is written at its place
// as soon as it is compressed, the embeddings' Δ is made a block of rows at a time, and the
// zstd stage reads the file back through a few MiB of buffers. The process holds neither model nor
// the artifact.
#pragma once

#include "compress/layerwise.hpp"
#include "compress/recipe.hpp"
#include "model/safetensors_writer.hpp"
#include "model/weight_store.hpp"

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

namespace optkit::compress {

struct DeltaWriteResult {
  std::uint64_t artifact_bytes = 0;     // the tensors file as stored (after zstd when enabled)
  std::uint64_t uncompressed_bytes = 0; // the fine-tuned model in fp16
  double compression_ratio = 0;
};

class DeltaArtifactWriter final : public CompressedLayerSink {
public:
  // Plans delta.safetensors in `directory` (which must exist) and writes at once what needs no
  // calibration: the embeddings' Δ and the variant's tensors outside the linear layers.
  DeltaArtifactWriter(const std::filesystem::path& directory, const std::filesystem::path& finetuned,
                      const std::filesystem::path& base, const Recipe& recipe);
  // A linear layer's compressed Δ, or the next block of its rows (the LM head's comes in blocks).
  void add_linear(const CompressedLinear& linear) override;
  // The delta format keeps the variant's own norms (copied at construction); nothing to do.
  void end_layer(std::int64_t, const std::map<std::string, std::vector<float>>&) override {}
  // Completes the artifact: the zstd stage when the recipe has it, delta_config.json, config.json,
  // the tokenizer files, recipe.yaml and compression_report.json.
  DeltaWriteResult finish(nlohmann::json report);

private:
  void write_rounded_delta(const std::string& name);

  std::filesystem::path m_directory, m_finetuned, m_base;
  const Recipe& m_recipe;
  model::WeightStore m_variant, m_base_store;
  std::unique_ptr<model::ShardedSafetensorsWriter> m_file;
};

} // namespace optkit::compress
