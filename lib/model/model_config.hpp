// The architecture of a Hugging Face causal LM as its config.json describes it. Supported:
// LlamaForCausalLM (incl. rope_scaling llama3 and linear), MistralForCausalLM (sliding window),
// Qwen2ForCausalLM (q/k/v bias), Qwen3ForCausalLM (q/k RMSNorm), Gemma2ForCausalLM and
// Gemma3ForCausalLM (text; (1 + w) norms before and after each sub-block, GeGLU, scaled
// embeddings, soft-capping, sliding layers interleaved with global ones, Gemma 3's local RoPE
// base), Phi3ForCausalLM (Phi-3 and Phi-4: q/k/v stored as one qkv_proj and gate/up as one
// gate_up_proj, LongRoPE, partial rotary), MixtralForCausalLM, Qwen2MoeForCausalLM and Qwen3MoeForCausalLM
// (mixture-of-experts MLPs: a softmax router, top-k experts, each a SwiGLU; Qwen2-MoE's sigmoid-gated shared expert);
// grouped-query attention and tied embeddings for all of them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace optkit::model {

enum class Architecture { llama, mistral, qwen2, qwen3, gemma2, gemma3, phi3, mixtral, qwen2_moe, qwen3_moe };

// The MLP's gate activation: SwiGLU's silu, GeGLU's tanh-approximated GELU (gelu_pytorch_tanh).
enum class Activation { silu, gelu_tanh };

struct RopeScaling {
  std::string type; // "llama3", "linear", "longrope" (Phi-3's "su" and "yarn" are read as longrope) or
                    // "frequency_factors"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192;
  // LongRoPE: each rotated pair's wavelength stretch while a sequence is at most
  // original_max_position_embeddings long (short) and once it is longer (long), rotary_dim / 2
  // each, and the factor cos and sin are multiplied by.
  std::vector<double> short_factor, long_factor;
  double attention_factor = 1.0;
  // "frequency_factors" (a GGUF's rope_freqs.weight): each rotary frequency divided by its own
  // factor, rotary_dim / 2 of them.
  std::vector<double> frequency_factors;
};

struct ModelConfig {
  Architecture architecture = Architecture::llama;
  std::string architecture_name; // as written in config.json
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t rotary_dim = 0; // the leading dims of each head RoPE rotates (partial_rotary_factor); 0: all
  std::int64_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;
  bool qk_norm = false;
  std::int64_t sliding_window = 0; // 0: full attention
  // Which layers slide (Gemma's layer_types); empty: every layer when sliding_window > 0 (Mistral).
  std::vector<bool> sliding_layers;
  Activation activation = Activation::silu;
  float norm_gain_offset = 0;       // Gemma stores an RMSNorm's gain as w in x̂·(1 + w): 1
  bool sandwich_norms = false;      // Gemma: a norm after attention and after the MLP too
  bool scaled_embeddings = false;   // Gemma: embeddings times √hidden_size
  double query_pre_attn_scalar = 0; // scores scale by its −½ power; 0: head_dim's
  float attention_softcap = 0;      // scores = cap·tanh(scores / cap); 0: none
  float final_softcap = 0;          // the same on the logits
  double local_rope_theta = 0;      // Gemma 3: the sliding layers' RoPE base, unscaled; 0: none
  // Mixture of experts: 0 experts for a dense MLP in every layer.
  std::int64_t num_experts = 0;
  std::int64_t experts_per_token = 0;               // top-k
  std::int64_t expert_intermediate_size = 0;        // each expert's SwiGLU width
  bool normalize_expert_weights = false;            // the top-k weights rescaled to sum to 1
  std::vector<bool> moe_layers;                     // which layers route (Qwen3-MoE's dense layers: false)
  std::int64_t shared_expert_intermediate_size = 0; // Qwen2-MoE: a shared expert beside the routed ones
  bool fused_projections = false; // Phi-3: q/k/v stored as self_attn.qkv_proj, gate/up as mlp.gate_up_proj
  std::optional<std::int64_t> bos_token_id;
  std::vector<std::int64_t> eos_token_ids;
  std::string torch_dtype;

  std::int64_t q_dim() const { return num_heads * head_dim; }
  std::int64_t rotated_dims() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  // Layer `layer`'s window (0: it attends to every earlier position).
  std::int64_t window_of(std::int64_t layer) const;
  // Whether layer `layer` rotates with the local RoPE base (Gemma 3's sliding layers).
  bool uses_local_rope(std::int64_t layer) const;
  float attention_scale() const;
  // LongRoPE: a sequence longer than this many tokens rotates with the long factors (0: no switch).
  std::int64_t long_rope_threshold() const;
  // Whether layer `layer`'s MLP is a mixture of experts.
  bool is_moe_layer(std::int64_t layer) const;
  std::int64_t kv_dim() const { return num_kv_heads * head_dim; }
  std::int64_t parameter_count() const;
};

// `source` names the file in messages. Throws InputError for a missing/ill-typed key or an
// unsupported architecture (naming the supported list).
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& source);
ModelConfig load_model_config(const std::filesystem::path& model_dir);
std::string_view supported_architectures();

// RoPE inverse frequencies (rotary_dim / 2 of them) including rope_scaling (LongRoPE's short factors).
std::vector<double> rope_inverse_frequencies(const ModelConfig& config);
// LongRoPE's long factors' frequencies; empty for any other scaling.
std::vector<double> long_rope_inverse_frequencies(const ModelConfig& config);
// What cos and sin are multiplied by (LongRoPE's attention factor; 1 otherwise).
double rope_attention_factor(const ModelConfig& config);
// The sliding layers' (local_rope_theta, no scaling); empty when the model has no local base.
std::vector<double> local_rope_inverse_frequencies(const ModelConfig& config);

// What a model is, in a line: its architecture and the features it uses ("sliding window 4096 on
// 5 of 6 layers, attention soft-cap 50, ...").
std::string describe_features(const ModelConfig& config);

// What makes `b` another shape than `a` for a runtime holding `a`'s KV cache and buffers
// ("num_hidden_layers 16 vs 2", the first difference; empty when none): the architecture, the
// vocabulary, every width, the layer count and the MoE layout.
std::string shape_difference(const ModelConfig& a, const ModelConfig& b);

} // namespace optkit::model
