// The per-layer vectors an architecture stores (norm gains, biases) by checkpoint name, in one
// list that the runtime's loaders, compress and the random-model writer all read.
#pragma once

#include "model/model_config.hpp"

#include <cstdint>
#include <string>
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

} // namespace optkit::model
