// AWQ applied to a decoder layer of the model being compressed (quant/awq.hpp has the search):
// llm-compressor's mappings in its order — the input norm to q/k/v, v_proj to o_proj (skipped
// under grouped-query attention or with q/k/v biases), the post-attention norm to gate/up, up_proj
// to down_proj — each searched on the layer's calibration statistics and scored by its parent
// module's output error: the decoder layer's output, on up to kAwqSearchTokens calibration
// tokens, for q/k/v and gate/up; the linear's own (through the inputs' Hessian) for o_proj and
// down_proj. On a mixture of experts (llm-compressor's MoE mappings), the post-attention norm
// goes to every expert's gate and up, and each expert's up_proj to its own down_proj, on the rows
// it is calibrated on. The winner's W·diag(s) goes into every linear reading the input — those
// the recipe compresses are the balance layers the search quantizes; a linear it leaves alone
// (a mixture's router and shared-expert gate, an ignored projection) takes s unquantized, and
// counts in the weight statistic as llm-compressor's balance layers do — and 1/s into the
// producer: the norm (as stored, returned in `norms`) or the producing linear's rows, so the
// layer computes the same function before quantization.
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

// An expert's down-projection inputs as AWQ reads them (no tokens: the expert is not smoothed).
struct AwqExpertInputs {
  std::vector<float> mean_abs, hessian;
  std::int64_t tokens = 0;
};

// What AWQ reads of a layer's calibration inputs, per linear input, and per expert.
struct AwqStatistics {
  std::function<bool(runtime::LinearInput)> observed;
  std::function<std::vector<float>(runtime::LinearInput)> mean_abs; // mean |x| per column
  std::function<std::vector<float>(runtime::LinearInput)> hessian;  // 2/N·XᵀX
  std::function<AwqExpertInputs(std::int64_t expert)> expert_hidden;
};

// Smooths `layer` of `model` as the recipe's AWQ options say. `lengths` and `x`: the calibration
// sequences and the layer's input states. `smoothing` gets each smoothed input's s (for the
// Hessians compress reads afterwards; an expert's down input is not there: its Hessian is made
// afterwards from the smoothed weights). `tensors` gets the folded norms, and the weights that took
// s and are not compressed (a mixture's router and shared-expert gate).
void apply_awq(runtime::LayerwiseModel& model, const Recipe& recipe, std::int64_t layer,
               const AwqStatistics& statistics, std::span<const std::int64_t> lengths, runtime::HiddenStates& x,
               model::DType scale_dtype, std::map<runtime::LinearInput, std::vector<float>>& smoothing,
               std::map<std::string, std::vector<float>>& tensors);

} // namespace optkit::compress
