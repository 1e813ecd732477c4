#include "runtime/layer_vectors.hpp"

namespace optkit::runtime {

std::vector<LayerVector>
layer_vectors(const model::ModelConfig& c) {
  std::vector<LayerVector> out;
  const auto add = [&](std::string name, auto base, auto variant, std::int64_t size, bool gain) {
    out.push_back({std::move(name), base, variant, size, gain});
  };
  using L = DecoderLayerWeights;
  using V = VariantLayer;
  add("input_layernorm.weight", &L::input_norm, &V::input_norm, c.hidden_size, true);
  if (c.sandwich_norms) { // Gemma: post_attention_layernorm is on the attention's output
    add("post_attention_layernorm.weight", &L::attention_out_norm, &V::attention_out_norm, c.hidden_size, true);
    add("pre_feedforward_layernorm.weight", &L::mlp_norm, &V::mlp_norm, c.hidden_size, true);
    add("post_feedforward_layernorm.weight", &L::mlp_out_norm, &V::mlp_out_norm, c.hidden_size, true);
  } else {
    add("post_attention_layernorm.weight", &L::mlp_norm, &V::mlp_norm, c.hidden_size, true);
  }
  if (c.qkv_bias) {
    add("self_attn.q_proj.bias", &L::q_bias, &V::q_bias, c.q_dim(), false);
    add("self_attn.k_proj.bias", &L::k_bias, &V::k_bias, c.kv_dim(), false);
    add("self_attn.v_proj.bias", &L::v_bias, &V::v_bias, c.kv_dim(), false);
  }
  if (c.qk_norm) {
    add("self_attn.q_norm.weight", &L::q_norm, &V::q_norm, c.head_dim, true);
    add("self_attn.k_norm.weight", &L::k_norm, &V::k_norm, c.head_dim, true);
  }
  return out;
}

std::vector<float>
held_gain(std::vector<float> stored, const model::ModelConfig& c) {
  for (auto& v : stored)
    v += c.norm_gain_offset;
  return stored;
}

std::vector<float>
stored_gain(std::vector<float> held, const model::ModelConfig& c) {
  for (auto& v : held)
    v -= c.norm_gain_offset;
  return held;
}

} // namespace optkit::runtime
