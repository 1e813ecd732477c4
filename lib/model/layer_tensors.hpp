// The per-layer tensors an architecture stores beyond the attention's and a dense MLP's
// projections, by checkpoint name: its vectors (norm gains, biases) and a mixture of experts'
// router and experts. One list that the runtime's loaders, compress and the random-model writer
// all read.
#pragma once

#include "model/model_config.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace optkit::model {

enum class LayerVectorRole {
  input_norm,         // before attention
  attention_out_norm, // Gemma: on the attention's output, before the residual add
  mlp_norm,           // before the MLP
  mlp_out_norm,       // Gemma: on the MLP's output, before the residual add
  q_bias,
  k_bias,
  v_bias,
  q_norm,
  k_norm
};

struct LayerVectorSpec {
  std::string name; // after "model.layers.<i>.": "input_layernorm.weight", "self_attn.q_proj.bias", ...
  LayerVectorRole role;
  std::int64_t size;
  bool gain; // an RMSNorm's gain: a model with norm_gain_offset stores w of (offset + w)
};

std::vector<LayerVectorSpec> layer_vector_specs(const ModelConfig& config);

// An MoE layer's router, [num_experts, hidden] ("model.layers.3.block_sparse_moe.gate" in
// Mixtral, "model.layers.3.mlp.gate" in Qwen3-MoE), and its experts' SwiGLU projections (Mixtral's
// w1, w3, w2; Qwen's gate_proj, up_proj, down_proj).
enum class ExpertProjection { gate, up, down };
std::string router_module(const ModelConfig& config, std::int64_t layer);
std::string expert_module(const ModelConfig& config, std::int64_t layer, std::int64_t expert, ExpertProjection p);
// [rows, cols] of an expert's projection.
std::pair<std::int64_t, std::int64_t> expert_shape(const ModelConfig& config, ExpertProjection p);
// Qwen2-MoE's shared expert, beside the routed ones ("model.layers.3.mlp.shared_expert.gate_proj",
// [rows, cols] of width shared_expert_intermediate_size), and its gate, [1, hidden]
// ("model.layers.3.mlp.shared_expert_gate").
std::string shared_expert_module(std::int64_t layer, ExpertProjection p);
std::pair<std::int64_t, std::int64_t> shared_expert_shape(const ModelConfig& config, ExpertProjection p);
std::string shared_expert_gate_module(std::int64_t layer);

// Phi-3 stores a layer's q/k/v as one self_attn.qkv_proj ([q_dim + 2·kv_dim, hidden], q's rows
// first) and gate/up as one mlp.gate_up_proj ([2·intermediate, hidden], gate's first).
struct FusedLinear {
  std::string name;               // "self_attn.qkv_proj"
  std::vector<std::string> parts; // "self_attn.q_proj", ..., in row order
};
// The fused modules of `config`'s layers (none unless fused_projections).
std::vector<FusedLinear> fused_linears(const ModelConfig& config);
// Where a dense layer's linear `name` ("self_attn.k_proj") is stored, under "model.layers.<i>.":
// its own module, or rows [first_row, first_row + its rows) of a fused one of stored_rows rows.
struct StoredLinear {
  std::string module;
  std::int64_t first_row = 0;
  std::int64_t stored_rows = 0;
};
StoredLinear stored_linear(const ModelConfig& config, const std::string& name);

} // namespace optkit::model
