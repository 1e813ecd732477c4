#include "runtime/layer_vectors.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

namespace optkit::runtime {

namespace {

using L = DecoderLayerWeights;
using V = VariantLayer;
// In LayerVectorRole's order.
constexpr std::vector<float> L::*kBase[] = {&L::input_norm, &L::attention_out_norm,
                                            &L::mlp_norm,   &L::mlp_out_norm,
                                            &L::q_bias,     &L::k_bias,
                                            &L::v_bias,     &L::q_norm,
                                            &L::k_norm};
constexpr std::vector<float> V::*kVariant[] = {&V::input_norm, &V::attention_out_norm,
                                               &V::mlp_norm,   &V::mlp_out_norm,
                                               &V::q_bias,     &V::k_bias,
                                               &V::v_bias,     &V::q_norm,
                                               &V::k_norm};

} // namespace

std::vector<float> DecoderLayerWeights::*
base_vector(model::LayerVectorRole role) {
  return kBase[static_cast<std::size_t>(role)];
}

std::vector<LayerVector>
layer_vectors(const model::ModelConfig& c) {
  std::vector<LayerVector> out;
  for (auto& spec : model::layer_vector_specs(c)) {
    const auto role = static_cast<std::size_t>(spec.role);
    out.push_back({std::move(spec), kBase[role], kVariant[role]});
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

std::string
norm_tensor_name(const model::ModelConfig& config, std::int64_t layer, LinearInput input) {
  const auto role =
      input == LinearInput::attention_in ? model::LayerVectorRole::input_norm : model::LayerVectorRole::mlp_norm;
  for (const auto& v : model::layer_vector_specs(config))
    if (v.role == role)
      return fmt::format("model.layers.{}.{}", layer, v.name);
  throw RuntimeFailure("no norm before a smoothed input");
}

} // namespace optkit::runtime
