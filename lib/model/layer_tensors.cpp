#include "model/layer_tensors.hpp"

namespace optkit::model {

std::vector<LayerVectorSpec>
layer_vector_specs(const ModelConfig& c) {
  using R = LayerVectorRole;
  std::vector<LayerVectorSpec> out{{"input_layernorm.weight", R::input_norm, c.hidden_size, true}};
  if (c.sandwich_norms) { // Gemma: post_attention_layernorm is on the attention's output
    out.push_back({"post_attention_layernorm.weight", R::attention_out_norm, c.hidden_size, true});
    out.push_back({"pre_feedforward_layernorm.weight", R::mlp_norm, c.hidden_size, true});
    out.push_back({"post_feedforward_layernorm.weight", R::mlp_out_norm, c.hidden_size, true});
  } else {
    out.push_back({"post_attention_layernorm.weight", R::mlp_norm, c.hidden_size, true});
  }
  if (c.qkv_bias) {
    out.push_back({"self_attn.q_proj.bias", R::q_bias, c.q_dim(), false});
    out.push_back({"self_attn.k_proj.bias", R::k_bias, c.kv_dim(), false});
    out.push_back({"self_attn.v_proj.bias", R::v_bias, c.kv_dim(), false});
  }
  if (c.qk_norm) {
    out.push_back({"self_attn.q_norm.weight", R::q_norm, c.head_dim, true});
    out.push_back({"self_attn.k_norm.weight", R::k_norm, c.head_dim, true});
  }
  return out;
}

} // namespace optkit::model
