// A decoder-only model's weights as the CPU runtime holds them: the config, the mapped tensors,
// per layer the norms, biases and the seven LinearWeights, the final norm, the embedding and the
// LM head (the embedding itself when tied). Loaded once; inference (CpuTransformer) and
// layer-wise calibration (LayerwiseModel) both run over it.
#pragma once

#include "model/model_config.hpp"
#include "model/weight_store.hpp"
#include "runtime/linear_weight.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace optkit::runtime {

// A layer's vectors are empty where the architecture has none (model/layer_tensors.hpp names them). Norm
// gains are held as the multiplier itself: Gemma's stored w is held as 1 + w.
struct DecoderLayerWeights {
  std::vector<float> input_norm;         // before attention
  std::vector<float> attention_out_norm; // Gemma: on the attention's output, before the residual add
  std::vector<float> mlp_norm;           // before the MLP
  std::vector<float> mlp_out_norm;       // Gemma: on the MLP's output, before the residual add
  std::vector<float> q_bias, k_bias, v_bias, q_norm, k_norm;
  // An FP8 KV cache (kv_cache_scheme): K and V are stored as FP8(x / scale) · scale, one scale per
  // KV head; empty: kept in full precision.
  std::vector<float> k_scale, v_scale;
  // A GGUF's cache, as llama.cpp keeps it by default: K and V rounded to fp16 (when no scales).
  bool f16_kv_cache = false;
  std::unique_ptr<LinearWeight> q, k, v, o;
  std::unique_ptr<LinearWeight> gate, up, down; // a dense MLP (null in a mixture-of-experts layer)
  // A mixture-of-experts layer: the router [num_experts, hidden] and each expert's SwiGLU.
  struct Expert {
    std::unique_ptr<LinearWeight> gate, up, down;
  };
  std::unique_ptr<LinearWeight> router;
  std::vector<Expert> experts;
  Expert shared_expert;                             // Qwen2-MoE: on every row, beside the routed ones
  std::unique_ptr<LinearWeight> shared_expert_gate; // [1, hidden]: sigmoid(x·g) scales the shared expert
};

class DecoderWeights {
public:
  // `delta`: a compressed delta (optkit compress delta) whose base is `model_dir`, merged on load
  // (W_base + Δ, the variant's norms taken from the delta). `activations`: how BF16 weights
  // multiply their activations (runtime/activation_precision.hpp).
  // `weights`: the safetensors mapped (zero copy) or read into memory (model/safetensors.hpp).
  // `layout`: where dense BF16 weights live (runtime/linear_weight.hpp).
  DecoderWeights(const std::filesystem::path& model_dir, const std::optional<std::filesystem::path>& delta,
                 ActivationPrecision activations = ActivationPrecision::fp32,
                 model::LoadMode weights = model::LoadMode::map, WeightLayout layout = WeightLayout::fastest);

  const model::ModelConfig& config() const { return m_config; }
  const model::WeightStore& store() const { return *m_store; }
  const DecoderLayerWeights& layer(std::int64_t index) const { return m_layers.at(static_cast<std::size_t>(index)); }
  DecoderLayerWeights& layer(std::int64_t index) { return m_layers.at(static_cast<std::size_t>(index)); }
  const std::vector<float>& final_norm() const { return m_final_norm; }
  const LinearWeight& embedding() const { return *m_embedding; }
  const LinearWeight& lm_head() const { return *m_lm_head; }
  // RoPE inverse frequencies (rotary_dim / 2), rope_scaling applied (LongRoPE's short factors).
  const std::vector<float>& inverse_frequencies() const { return m_inv_freq; }
  // Gemma 3's sliding layers' (empty for a model without a local base).
  const std::vector<float>& local_inverse_frequencies() const { return m_local_inv_freq; }
  // LongRoPE's long factors' (empty without LongRoPE), for sequences past long_rope_threshold().
  const std::vector<float>& long_inverse_frequencies() const { return m_long_inv_freq; }
  // What cos and sin are multiplied by (LongRoPE's attention factor; 1 otherwise).
  float rope_attention_factor() const { return m_rope_attention_factor; }
  // What an embedding row is multiplied by: Gemma's √hidden_size, rounded to the embedding's
  // stored dtype as transformers rounds it; 1 otherwise.
  float embedding_multiplier() const { return m_embedding_multiplier; }
  // The slot of a decoder layer's linear layer by its HF name ("self_attn.q_proj", ...; an expert's,
  // the router's, "mlp.gate").
  std::unique_ptr<LinearWeight>& linear(std::int64_t layer, std::string_view name);
  const LinearWeight& linear(std::int64_t layer, std::string_view name) const {
    return *const_cast<DecoderWeights*>(this)->linear(layer, name);
  }
  // Bytes of weights a decode step of one token streams (all linear layers and the LM head; of a
  // mixture of experts, the router and top-k experts' worth).
  std::uint64_t streamed_bytes() const;

private:
  model::ModelConfig m_config;
  std::unique_ptr<model::WeightStore> m_store;
  std::vector<DecoderLayerWeights> m_layers;
  std::vector<float> m_final_norm;
  std::unique_ptr<LinearWeight> m_embedding;
  std::unique_ptr<LinearWeight> m_lm_head_owned;
  const LinearWeight* m_lm_head = nullptr;
  std::vector<float> m_inv_freq, m_local_inv_freq, m_long_inv_freq;
  float m_rope_attention_factor = 1;
  float m_embedding_multiplier = 1.0f;
};

} // namespace optkit::runtime
