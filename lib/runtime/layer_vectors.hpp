// Where each of a layer's vectors (model/layer_tensors.hpp) lives in the base's layer and in a
// served variant's, and the gains' conversion between stored and held values.
#pragma once

#include "model/layer_tensors.hpp"
#include "runtime/decoder_pass.hpp"
#include "runtime/decoder_weights.hpp"
#include "runtime/delta_variant.hpp"

#include <vector>

namespace optkit::runtime {

struct LayerVector : model::LayerVectorSpec {
  std::vector<float> DecoderLayerWeights::*base;
  std::vector<float> VariantLayer::*variant;
};

std::vector<LayerVector> layer_vectors(const model::ModelConfig& config);
std::vector<float> DecoderLayerWeights::*base_vector(model::LayerVectorRole role);

// A gain vector as held (stored + the offset), and back as the checkpoint stores it.
std::vector<float> held_gain(std::vector<float> stored, const model::ModelConfig& config);
std::vector<float> stored_gain(std::vector<float> held, const model::ModelConfig& config);

// The checkpoint name of the norm in front of `input` (attention_in or mlp_in) in layer `layer`.
std::string norm_tensor_name(const model::ModelConfig& config, std::int64_t layer, LinearInput input);

} // namespace optkit::runtime
