#include "compress/awq_smoothing.hpp"

#include "compress/layerwise.hpp"
#include "quant/awq.hpp"
#include "quant/smoothquant.hpp"
#include "runtime/layer_vectors.hpp"

#include <fmt/format.h>

namespace optkit::compress {

namespace {

using runtime::LinearInput;

// AWQ's mappings in llm-compressor's order: each input its balance layers read, and the layer
// producing it whose output channels take 1/s (a norm, or these linears' rows).
struct AwqMapping {
  LinearInput input;
  const char* producer; // nullptr: the norm in front of the input
};
constexpr AwqMapping kAwqMappings[] = {{LinearInput::attention_in, nullptr},
                                       {LinearInput::attention_out, "self_attn.v_proj"},
                                       {LinearInput::mlp_in, nullptr},
                                       {LinearInput::mlp_hidden, "mlp.up_proj"}};

// Whether AWQ can smooth `mapping` in this layer: not a mixture of experts' MLP (its experts see
// different rows), v_proj → o_proj only when v_proj's rows are o_proj's columns (no grouped-query
// attention, as llm-compressor skips it) and v_proj has no bias to divide too.
bool
awq_applies(const runtime::LayerwiseModel& model, std::int64_t layer, const AwqMapping& mapping) {
  const auto& config = model.config();
  if (mapping.input != LinearInput::attention_in && mapping.input != LinearInput::attention_out &&
      config.is_moe_layer(layer))
    return false;
  if (mapping.input == LinearInput::attention_out)
    return !config.qkv_bias &&
           model.linear(layer, "self_attn.v_proj").rows() == model.linear(layer, "self_attn.o_proj").cols();
  return true;
}

// The calibration sequences AWQ's search measures a layer's output on: whole sequences from the
// first, up to kAwqSearchTokens tokens, and the layer's output on them before anything is smoothed.

struct LayerProbe {
  std::vector<std::int64_t> lengths;
  std::vector<float> input, reference;
};

LayerProbe
layer_probe(runtime::LayerwiseModel& model, std::int64_t layer, std::span<const std::int64_t> lengths,
            runtime::HiddenStates& x) {
  LayerProbe probe;
  std::int64_t tokens = 0;
  for (const auto length : lengths) {
    if (!probe.lengths.empty() && tokens + length > kAwqSearchTokens)
      break;
    probe.lengths.push_back(length);
    tokens += length;
  }
  const auto states = x.rows(0, tokens);
  probe.input.assign(states.begin(), states.end());
  x.release(0, tokens);
  probe.reference = probe.input;
  model.run_layer(layer, probe.lengths, probe.reference);
  return probe;
}

// Σ (y − y_ref)² of the layer's output on the probe, with the balance layers `names` (their
// weights `weights`) replaced by Q(W·diag(s))·diag(s)⁻¹; the layer keeps those replacements.
double
layer_output_error(runtime::LayerwiseModel& model, std::int64_t layer, const LayerProbe& probe,
                   const std::vector<std::string>& names, const std::vector<std::vector<float>>& weights,
                   std::span<const float> s, const Recipe& recipe, model::DType scale_dtype) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto rows = model.linear(layer, names[i]).rows(), cols = model.linear(layer, names[i]).cols();
    model.replace_linear(
        layer, names[i],
        runtime::make_owned_dense_weight(
            quant::awq_fake_quantized(weights[i], rows, cols, s, recipe.weights, scale_dtype), rows, cols));
  }
  auto y = probe.input;
  model.run_layer(layer, probe.lengths, y);
  double error = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double d = static_cast<double>(y[i]) - static_cast<double>(probe.reference[i]);
    error += d * d;
  }
  return error;
}

} // namespace

void
apply_awq(runtime::LayerwiseModel& model, const Recipe& recipe, std::int64_t layer, const AwqStatistics& statistics,
          std::span<const std::int64_t> lengths, runtime::HiddenStates& x, model::DType scale_dtype,
          std::map<LinearInput, std::vector<float>>& smoothing, std::map<std::string, std::vector<float>>& norms) {
  const auto probe = layer_probe(model, layer, lengths, x);
  for (const auto& mapping : kAwqMappings) {
    if (!awq_applies(model, layer, mapping) || !statistics.observed(mapping.input))
      continue;
    std::vector<std::string> names;
    std::vector<std::vector<float>> weights;
    for (const auto& l : runtime::kDecoderLinears)
      if (l.input == mapping.input && recipe_targets(recipe, fmt::format("model.layers.{}.{}", layer, l.name))) {
        names.emplace_back(l.name);
        weights.push_back(runtime::dense_floats(model.linear(layer, l.name)));
      }
    if (names.empty())
      continue;
    const auto cols = model.linear(layer, names.front()).cols();
    const std::vector<std::span<const float>> views(weights.begin(), weights.end());
    const auto group = recipe.weights.strategy == quant::Strategy::group ? recipe.weights.group_size : cols;
    auto candidates = quant::awq_candidates(statistics.mean_abs(mapping.input), views, cols, group, *recipe.awq);
    const bool parent_is_layer = !mapping.producer;
    const auto hessian = parent_is_layer ? std::vector<float>{} : statistics.hessian(mapping.input);
    const auto search = quant::search_awq(std::move(candidates), [&](const quant::AwqCandidate& c) {
      return parent_is_layer ? layer_output_error(model, layer, probe, names, weights, c.scales, recipe, scale_dtype)
                             : quant::awq_linear_error(views, cols, c.scales, hessian, recipe.weights, scale_dtype);
    });
    const auto& s = search.best.scales;
    for (std::size_t i = 0; i < names.size(); ++i) {
      quant::scale_columns(weights[i], cols, s);
      const auto rows = model.linear(layer, names[i]).rows();
      model.replace_linear(layer, names[i], runtime::make_owned_dense_weight(std::move(weights[i]), rows, cols));
    }
    if (mapping.producer) {
      auto producer = runtime::dense_floats(model.linear(layer, mapping.producer));
      const auto producer_cols = model.linear(layer, mapping.producer).cols();
      for (std::size_t r = 0; r < s.size(); ++r)
        for (std::int64_t c = 0; c < producer_cols; ++c)
          producer[r * static_cast<std::size_t>(producer_cols) + static_cast<std::size_t>(c)] /= s[r];
      model.replace_linear(layer, mapping.producer,
                           runtime::make_owned_dense_weight(std::move(producer), cols, producer_cols));
    } else {
      auto& norm = model.norm_weight(layer, mapping.input);
      for (std::size_t j = 0; j < norm.size(); ++j)
        norm[j] /= s[j];
      norms[runtime::norm_tensor_name(model.config(), layer, mapping.input)] =
          runtime::stored_gain(norm, model.config());
    }
    smoothing.emplace(mapping.input, s);
  }
}

} // namespace optkit::compress
