// The CPU transformer: Llama / Mistral / Qwen2 / Qwen3 decoder layers (RMSNorm, RoPE incl. llama3
// scaling, grouped-query attention with a KV cache, SwiGLU) over LinearWeight layers, fp32
// activations, multi-threaded. Batches sequences of different lengths and phases in one pass.
#pragma once

#include "core/thread_pool.hpp"
#include "model/model_config.hpp"
#include "model/weight_store.hpp"
#include "runtime/kv_cache.hpp"
#include "runtime/language_model.hpp"
#include "runtime/linear_weight.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace optkit::runtime {

struct RuntimeOptions {
  unsigned threads = 0; // 0: one per hardware thread
  // A compressed delta (optkit compress delta) applied to the model folder, which must be the
  // delta's base: W_base + Δ merged on load, the variant's norms taken from the delta.
  std::optional<std::filesystem::path> delta;
};

// Where a decoder layer's linear layers read their input: q/k/v share the normed hidden state,
// o reads the attention output, gate/up share the post-attention normed state, down reads
// silu(gate)·up.
enum class LinearInput { attention_in, attention_out, mlp_in, mlp_hidden };

// Sees every linear input of the layer run_layer() executes (compress calibration).
class ActivationTap {
public:
  virtual ~ActivationTap() = default;
  // x is [rows, cols] for `sequences` whole sequences.
  virtual void observe(LinearInput input, const float* x, std::int64_t rows, std::int64_t cols,
                       std::int64_t sequences) = 0;
};

// The linear layers of a decoder layer by their HF names, and which input each reads.
struct LinearName {
  const char* name; // "self_attn.q_proj", ...
  LinearInput input;
};
inline constexpr LinearName kDecoderLinears[] = {
    {"self_attn.q_proj", LinearInput::attention_in}, {"self_attn.k_proj", LinearInput::attention_in},
    {"self_attn.v_proj", LinearInput::attention_in}, {"self_attn.o_proj", LinearInput::attention_out},
    {"mlp.gate_proj", LinearInput::mlp_in},          {"mlp.up_proj", LinearInput::mlp_in},
    {"mlp.down_proj", LinearInput::mlp_hidden}};

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

  // Layer-wise execution for calibration: whole sequences (lengths[i] tokens each, positions from
  // 0) as rows of hidden states x, through one decoder layer, with `tap` seeing every linear input.
  std::vector<float> embed(std::span<const TokenId> tokens) const;
  void run_layer(std::int64_t layer, std::span<const std::int64_t> lengths, std::vector<float>& x,
                 ActivationTap* tap = nullptr);
  const LinearWeight& linear(std::int64_t layer, std::string_view name) const;
  void replace_linear(std::int64_t layer, std::string_view name, std::unique_ptr<LinearWeight> weight);
  // The RMSNorm weight before attention (input_layernorm) or before the MLP.
  std::vector<float>& norm_weight(std::int64_t layer, LinearInput input);
  // For calibration after the last layer: the final RMSNorm of rows of x (the LM head's input),
  // and the LM head itself (the embedding when the two are tied).
  std::vector<float> final_norm(std::span<const float> x) const;
  const LinearWeight& lm_head() const { return *m_lm_head; }
  const model::WeightStore& weights() const { return *m_store; }

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

  void fill_rope(BatchRows& batch) const;
  void attention_block(const Layer& layer, KvCache& cache, std::int64_t cache_layer, const BatchRows& rows,
                       std::vector<float>& x, ActivationTap* tap);
  void mlp_block(const Layer& layer, std::vector<float>& x, ActivationTap* tap, std::int64_t sequences);
  std::unique_ptr<LinearWeight>& linear_slot(std::int64_t layer, std::string_view name);

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
