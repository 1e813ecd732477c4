// The CPU transformer: Llama / Mistral / Qwen2 / Qwen3 decoder layers (RMSNorm, RoPE incl. llama3
// scaling, grouped-query attention with a KV cache, SwiGLU) over LinearWeight layers, fp32
// activations, multi-threaded. Batches sequences of different lengths and phases in one pass.
#pragma once

#include "model/model_config.hpp"
#include "model/weight_store.hpp"
#include "runtime/kv_cache.hpp"
#include "runtime/language_model.hpp"
#include "runtime/linear_weight.hpp"
#include "runtime/thread_pool.hpp"

#include <filesystem>
#include <memory>
#include <vector>

namespace optkit::runtime {

struct RuntimeOptions {
  unsigned threads = 0; // 0: one per hardware thread
};

class CpuTransformer final : public LanguageModel {
public:
  CpuTransformer(const std::filesystem::path& model_dir, RuntimeOptions options = {});

  const model::ModelConfig& config() const override { return m_config; }
  SequenceId add_sequence() override { return m_cache.add(); }
  void remove_sequence(SequenceId sequence) override { m_cache.remove(sequence); }
  std::int64_t sequence_length(SequenceId sequence) const override { return m_cache.length(sequence); }
  std::vector<float> forward(std::span<const SequenceInput> inputs) override;

  // Bytes of weights a decode step streams (all linear layers and the LM head).
  std::uint64_t weight_bytes() const;
  std::string weight_format() const { return m_lm_head->format(); }

private:
  struct Layer {
    std::vector<float> input_norm, post_norm, q_bias, k_bias, v_bias, q_norm, k_norm;
    std::unique_ptr<LinearWeight> q, k, v, o, gate, up, down;
  };

  // What each activation row of a forward pass is: its sequence, its position, and the RoPE
  // cos/sin of that position (head_dim / 2 each), computed once for all layers.
  struct BatchRows {
    std::vector<SequenceId> sequence;
    std::vector<std::int64_t> position;
    std::vector<float> cos, sin;
  };

  void attention_block(const Layer& layer, std::int64_t index, const BatchRows& rows, std::vector<float>& x);
  void mlp_block(const Layer& layer, std::vector<float>& x);

  model::ModelConfig m_config;
  std::unique_ptr<model::WeightStore> m_store;
  ThreadPool m_pool;
  std::vector<Layer> m_layers;
  std::vector<float> m_final_norm;
  std::unique_ptr<LinearWeight> m_embedding;
  std::unique_ptr<LinearWeight> m_lm_head_owned;
  const LinearWeight* m_lm_head = nullptr;
  std::vector<float> m_inv_freq;
  KvCache m_cache;
};

} // namespace optkit::runtime
