// A model opened for layer-wise calibration (optkit compress): whole sequences as rows of hidden
// states through one decoder layer at a time, every linear input visible to a tap, and linear
// layers and norms replaced in place as they are compressed. Runs over the same weights and
// decoder pass as inference (CpuTransformer) but keeps no KV cache between calls.
#pragma once

#include "core/thread_pool.hpp"
#include "runtime/decoder_pass.hpp"
#include "runtime/decoder_weights.hpp"
#include "runtime/hidden_states.hpp"
#include "runtime/language_model.hpp"

#include <filesystem>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace optkit::runtime {

// Tokens of whole sequences run through a layer at once (one longer sequence alone).
inline constexpr std::int64_t kLayerChunkTokens = 8192;

class LayerwiseModel {
public:
  // threads 0: one per available CPU (core/available_cpus.hpp). `activations`: how BF16 weights
  // multiply their activations (runtime/activation_precision.hpp).
  LayerwiseModel(const std::filesystem::path& model_dir, unsigned threads,
                 ActivationPrecision activations = ActivationPrecision::fp32);

  const model::ModelConfig& config() const { return m_weights.config(); }
  const model::WeightStore& weights() const { return m_weights.store(); }

  // Hidden states (rows × hidden) of the tokens' embeddings.
  std::vector<float> embed(std::span<const TokenId> tokens) const;
  // Whole sequences (lengths[i] tokens each, positions from 0) as rows of x, through one decoder
  // layer, with `tap` seeing every linear input.
  void run_layer(std::int64_t layer, std::span<const std::int64_t> lengths, std::vector<float>& x,
                 ActivationTap* tap = nullptr);
  // run_layer over many sequences, a chunk of whole sequences (at most kLayerChunkTokens, or one
  // longer sequence) at a time, so the activations of one chunk are what is held at once; each chunk's
  // states are released once done (runtime/hidden_states.hpp).
  void run_layer_chunked(std::int64_t layer, std::span<const std::int64_t> lengths, HiddenStates& x,
                         ActivationTap* tap = nullptr);
  // The same chunks through the layer for `tap` alone: x is left as it is (no copy of it is made),
  // the layer's outputs discarded chunk by chunk.
  void observe_layer(std::int64_t layer, std::span<const std::int64_t> lengths, HiddenStates& x, ActivationTap& tap);
  const LinearWeight& linear(std::int64_t layer, std::string_view name) const;
  void replace_linear(std::int64_t layer, std::string_view name, std::unique_ptr<LinearWeight> weight);
  // Done with `layer` for good: its linear layers and norms are dropped and its mapped pages leave
  // the resident set, so a pass over the layers holds one layer's weights at a time. Running the
  // layer afterwards is an error.
  void release_layer(std::int64_t layer);
  // The RMSNorm weight before attention (attention_in) or before the MLP (mlp_in).
  std::vector<float>& norm_weight(std::int64_t layer, LinearInput input);
  // After the last layer: the final RMSNorm of rows of x (the LM head's input), and the LM head
  // itself (the embedding when the two are tied).
  std::vector<float> final_norm(std::span<const float> x) const;
  const LinearWeight& lm_head() const { return m_weights.lm_head(); }

private:
  DecoderWeights m_weights;
  ThreadPool m_pool;
  DecoderPass m_pass;
};

} // namespace optkit::runtime
