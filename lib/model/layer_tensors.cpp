#include "model/layer_tensors.hpp"

#include <fmt/format.h>

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

std::string
router_module(const ModelConfig& c, std::int64_t layer) {
  return fmt::format("model.layers.{}.{}", layer,
                     c.architecture == Architecture::mixtral ? "block_sparse_moe.gate" : "mlp.gate");
}

std::string
expert_module(const ModelConfig& c, std::int64_t layer, std::int64_t expert, ExpertProjection p) {
  static constexpr const char* kMixtral[] = {"w1", "w3", "w2"};
  static constexpr const char* kQwen[] = {"gate_proj", "up_proj", "down_proj"};
  const auto i = static_cast<std::size_t>(p);
  return c.architecture == Architecture::mixtral
             ? fmt::format("model.layers.{}.block_sparse_moe.experts.{}.{}", layer, expert, kMixtral[i])
             : fmt::format("model.layers.{}.mlp.experts.{}.{}", layer, expert, kQwen[i]);
}

namespace {

std::pair<std::int64_t, std::int64_t>
swiglu_shape(std::int64_t hidden, std::int64_t width, ExpertProjection p) {
  return p == ExpertProjection::down ? std::pair{hidden, width} : std::pair{width, hidden};
}

} // namespace

std::pair<std::int64_t, std::int64_t>
expert_shape(const ModelConfig& c, ExpertProjection p) {
  return swiglu_shape(c.hidden_size, c.expert_intermediate_size, p);
}

std::string
shared_expert_module(std::int64_t layer, ExpertProjection p) {
  static constexpr const char* kNames[] = {"gate_proj", "up_proj", "down_proj"};
  return fmt::format("model.layers.{}.mlp.shared_expert.{}", layer, kNames[static_cast<std::size_t>(p)]);
}

std::pair<std::int64_t, std::int64_t>
shared_expert_shape(const ModelConfig& c, ExpertProjection p) {
  return swiglu_shape(c.hidden_size, c.shared_expert_intermediate_size, p);
}

std::string
shared_expert_gate_module(std::int64_t layer) {
  return fmt::format("model.layers.{}.mlp.shared_expert_gate", layer);
}

std::vector<FusedLinear>
fused_linears(const ModelConfig& c) {
  if (!c.fused_projections)
    return {};
  return {{"self_attn.qkv_proj", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}},
          {"mlp.gate_up_proj", {"mlp.gate_proj", "mlp.up_proj"}}};
}

namespace {

// Rows of a dense layer's q/k/v or gate/up projection.
std::int64_t
projection_rows(const ModelConfig& c, const std::string& name) {
  if (name == "self_attn.q_proj")
    return c.q_dim();
  if (name == "self_attn.k_proj" || name == "self_attn.v_proj")
    return c.kv_dim();
  return c.intermediate_size;
}

} // namespace

StoredLinear
stored_linear(const ModelConfig& c, const std::string& name) {
  for (const auto& fused : fused_linears(c)) {
    StoredLinear stored{fused.name, -1, 0};
    for (const auto& part : fused.parts) {
      if (part == name)
        stored.first_row = stored.stored_rows;
      stored.stored_rows += projection_rows(c, part);
    }
    if (stored.first_row >= 0)
      return stored;
  }
  return {name, 0, 0};
}

} // namespace optkit::model
