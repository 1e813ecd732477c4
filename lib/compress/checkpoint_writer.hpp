// Writes a compressed model as a Hugging Face folder in the compressed-tensors format vLLM loads:
// config.json with `quantization_config`, safetensors holding, per compressed linear layer,
//   int-quantized    <P>.weight I8 [out, in] + <P>.weight_scale [out, 1]
//   pack-quantized   <P>.weight_packed I32 [out, ceil(in·bits/32)] + <P>.weight_scale [out, groups]
//                    + <P>.weight_shape I64 [2]
//   float-quantized  <P>.weight F8_E4M3 [out, in] + <P>.weight_scale [out, 1], [1], or with
//                    FP8 blocks [⌈out/rows⌉, ⌈in/cols⌉]
//   nvfp4-pack-quantized  <P>.weight_packed U8 [out, in/2] + <P>.weight_scale F8_E4M3 [out, in/16]
//                    + <P>.weight_global_scale F32 [1] (+ <P>.input_global_scale F32 [1] with FP4
//                    activations)
//   mxfp4-pack-quantized  <P>.weight_packed U8 [out, in/2] + <P>.weight_scale U8 [out, in/32]
// (other scales in the model's dtype), every other tensor as it was (norms with SmoothQuant folded in),
// the tokenizer files, recipe.yaml and compression_report.json.
//
// The writer streams: the output's tensors are known from the recipe and the source's shapes
// before anything is compressed, so the shards' layout is fixed up front (shards of at most
// `max_shard_bytes`, model.safetensors.index.json when there are several). The untouched tensors
// are copied byte for byte at once, each compressed linear as it is compressed, each layer's norms
// as the layer is done; the process holds neither the source nor the output.
#pragma once

#include "compress/layerwise.hpp"
#include "compress/recipe.hpp"
#include "model/model_config.hpp"
#include "model/safetensors_writer.hpp"
#include "model/weight_store.hpp"

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

namespace optkit::compress {

// transformers' save_pretrained default.
inline constexpr std::uint64_t kDefaultMaxShardBytes = 5'000'000'000ULL;

class CompressedCheckpointWriter final : public CompressedLayerSink {
public:
  // Plans the output in `directory` (which must exist and be empty) and copies the tensors outside
  // the decoder layers (embeddings, final norm, LM head).
  CompressedCheckpointWriter(const std::filesystem::path& directory, const std::filesystem::path& source,
                             const Recipe& recipe, std::uint64_t max_shard_bytes = kDefaultMaxShardBytes);
  // A decoder layer's compressed linear, encoded and written at once.
  void add_linear(const CompressedLinear& linear) override;
  // The layer's computed tensors (folded norms, KV-cache scales), and its other tensors copied from the source.
  void end_layer(std::int64_t layer, const std::map<std::string, std::vector<float>>& computed) override;
  // Completes the folder: config.json with the quantization config, the tokenizer files,
  // recipe.yaml and compression_report.json. Returns the bytes of safetensors written.
  std::uint64_t finish(const nlohmann::json& report);

private:
  void copy_from_source(const std::string& name);

  std::filesystem::path m_directory, m_source;
  const Recipe& m_recipe;
  model::WeightStore m_store;
  model::ModelConfig m_config;
  std::string m_format;
  std::unique_ptr<model::ShardedSafetensorsWriter> m_shards;
};

// The tokenizer and generation files a model folder carries beside its weights.
void copy_tokenizer_files(const std::filesystem::path& from, const std::filesystem::path& to);

// Bytes of a folder's *.safetensors files.
std::uint64_t safetensors_bytes(const std::filesystem::path& directory);

} // namespace optkit::compress
