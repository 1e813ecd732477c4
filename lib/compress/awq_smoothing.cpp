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

struct LayerProbe {
  std::vector<std::int64_t> lengths;
  std::vector<float> input, reference;
};

// The calibration sequences AWQ's search measures a layer's output on: whole sequences from the
// first, up to kAwqSearchTokens tokens, and the layer's output on them before anything is smoothed.
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

// The linears of the layer that read `input` and the recipe compresses (AWQ's balance layers),
// with their weights as fp32.
struct BalanceLayers {
  std::vector<std::string> names;
  std::vector<std::vector<float>> weights;
  std::int64_t cols = 0;
};

BalanceLayers
balance_layers(const runtime::LayerwiseModel& model, const Recipe& recipe, std::int64_t layer, LinearInput input) {
  BalanceLayers out;
  for (const auto& l : runtime::kDecoderLinears)
    if (l.input == input && recipe_targets(recipe, fmt::format("model.layers.{}.{}", layer, l.name))) {
      out.names.emplace_back(l.name);
      out.weights.push_back(runtime::dense_floats(model.linear(layer, l.name)));
      out.cols = model.linear(layer, l.name).cols();
    }
  return out;
}

// W·diag(s) into the balance layers, 1/s into the producer: the norm (its stored form recorded in
// `norms`) or the producing linear's rows.
void
apply_factors(runtime::LayerwiseModel& model, std::int64_t layer, const AwqMapping& mapping, BalanceLayers balance,
              const std::vector<float>& s, std::map<std::string, std::vector<float>>& norms) {
  for (std::size_t i = 0; i < balance.names.size(); ++i) {
    quant::scale_columns(balance.weights[i], balance.cols, s);
    const auto rows = model.linear(layer, balance.names[i]).rows();
    model.replace_linear(layer, balance.names[i],
                         runtime::make_owned_dense_weight(std::move(balance.weights[i]), rows, balance.cols));
  }
  if (mapping.producer) {
    auto producer = runtime::dense_floats(model.linear(layer, mapping.producer));
    const auto producer_cols = model.linear(layer, mapping.producer).cols();
    for (std::size_t r = 0; r < s.size(); ++r)
      for (std::int64_t c = 0; c < producer_cols; ++c)
        producer[r * static_cast<std::size_t>(producer_cols) + static_cast<std::size_t>(c)] /= s[r];
    model.replace_linear(layer, mapping.producer,
                         runtime::make_owned_dense_weight(std::move(producer), balance.cols, producer_cols));
    return;
  }
  auto& norm = model.norm_weight(layer, mapping.input);
  for (std::size_t j = 0; j < norm.size(); ++j)
    norm[j] /= s[j];
  norms[runtime::norm_tensor_name(model.config(), layer, mapping.input)] = runtime::stored_gain(norm, model.config());
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
    auto balance = balance_layers(model, recipe, layer, mapping.input);
    if (balance.names.empty())
      continue;
    const std::vector<std::span<const float>> views(balance.weights.begin(), balance.weights.end());
    const auto group = recipe.weights.strategy == quant::Strategy::group ? recipe.weights.group_size : balance.cols;
    auto candidates =
        quant::awq_candidates(statistics.mean_abs(mapping.input), views, balance.cols, group, *recipe.awq);
    const bool parent_is_layer = !mapping.producer;
    const auto hessian = parent_is_layer ? std::vector<float>{} : statistics.hessian(mapping.input);
    const auto search = quant::search_awq(std::move(candidates), [&](const quant::AwqCandidate& c) {
      return parent_is_layer
                 ? layer_output_error(model, layer, probe, balance.names, balance.weights, c.scales, recipe,
                                      scale_dtype)
                 : quant::awq_linear_error(views, balance.cols, c.scales, hessian, recipe.weights, scale_dtype);
    });
    apply_factors(model, layer, mapping, std::move(balance), search.best.scales, norms);
    smoothing.emplace(mapping.input, search.best.scales);
  }
}

} // namespace optkit::compress
