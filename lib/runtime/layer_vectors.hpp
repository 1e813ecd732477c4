// The per-layer vectors an architecture has (norm gains, biases): their checkpoint names and where
// each lives in the base's layer and in a served variant's, so that every loader reads the same
// list.
#pragma once

#include "model/model_config.hpp"
#include "runtime/decoder_weights.hpp"
#include "runtime/delta_variant.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace optkit::runtime {

struct LayerVector {
  std::string name; // after "model.layers.<i>.": "input_layernorm.weight", "self_attn.q_proj.bias", ...
  std::vector<float> DecoderLayerWeights::*base;
  std::vector<float> VariantLayer::*variant;
  std::int64_t size;
  bool gain; // an RMSNorm's gain: held as stored + config.norm_gain_offset
};

std::vector<LayerVector> layer_vectors(const model::ModelConfig& config);

// A gain vector as held (stored + the offset), and back as the checkpoint stores it.
std::vector<float> held_gain(std::vector<float> stored, const model::ModelConfig& config);
std::vector<float> stored_gain(std::vector<float> held, const model::ModelConfig& config);

} // namespace optkit::runtime
