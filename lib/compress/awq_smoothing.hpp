// AWQ applied to a decoder layer of the model being compressed (quant/awq.hpp has the search):
// llm-compressor's mappings in its order — the input norm to q/k/v, v_proj to o_proj (skipped
// under grouped-query attention or with q/k/v biases), the post-attention norm to gate/up, up_proj
// to down_proj (neither on a mixture of experts' MLP) — each searched on the layer's calibration
// statistics and scored by its parent module's output error: the decoder layer's output, on up
// to kAwqSearchTokens calibration tokens, for q/k/v and gate/up; the linear's own (through the
// inputs' Hessian) for o_proj and down_proj. The winner's W·diag(s) goes into the balance layers
// and 1/s into the producer: the norm (as stored, returned in `norms`) or the producing linear's
// rows, so the layer computes the same function before quantization.
#pragma once

#include "compress/recipe.hpp"
#include "runtime/decoder_pass.hpp"
#include "runtime/hidden_states.hpp"
#include "runtime/layerwise_model.hpp"

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace optkit::compress {

// Calibration tokens the layer-output score runs on (llm-compressor scores every cached batch;
// this bounds the search at 20 passes over these tokens per mapping).
inline constexpr std::int64_t kAwqSearchTokens = 4096;

// What AWQ reads of a layer's calibration inputs, per linear input.
struct AwqStatistics {
  std::function<bool(runtime::LinearInput)> observed;
  std::function<std::vector<float>(runtime::LinearInput)> mean_abs; // mean |x| per column
  std::function<std::vector<float>(runtime::LinearInput)> hessian;  // 2/N·XᵀX
};

// Smooths `layer` of `model` as the recipe's AWQ options say. `lengths` and `x`: the calibration
// sequences and the layer's input states. `smoothing` gets each smoothed input's s (for the
// Hessians compress reads afterwards).
void apply_awq(runtime::LayerwiseModel& model, const Recipe& recipe, std::int64_t layer,
               const AwqStatistics& statistics, std::span<const std::int64_t> lengths, runtime::HiddenStates& x,
               model::DType scale_dtype, std::map<runtime::LinearInput, std::vector<float>>& smoothing,
               std::map<std::string, std::vector<float>>& norms);

} // namespace optkit::compress
