#include "compress/awq_smoothing.hpp"

#include "compress/layerwise.hpp"
#include "model/layer_tensors.hpp"
#include "quant/awq.hpp"
#include "quant/smoothquant.hpp"
#include "runtime/layer_vectors.hpp"

#include <fmt/format.h>
#include <numeric>

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

// Whether AWQ can smooth `mapping` in this layer: v_proj → o_proj only when v_proj's rows are
// o_proj's columns (no grouped-query attention, as llm-compressor skips it) and v_proj has no bias
// to divide too.
bool
awq_applies(const runtime::LayerwiseModel& model, std::int64_t layer, const AwqMapping& mapping) {
  const auto& config = model.config();
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

// Every linear of the layer reading `input` — of `expert` alone, its down projection, for an
// expert's hidden input — with its weights as fp32: first the balance layers (those the recipe
// compresses), then the others (a mixture's router and shared-expert gate, which are never
// compressed, and any projection the recipe leaves alone).
struct InputReaders {
  std::vector<std::string> names;
  std::vector<std::vector<float>> weights;
  std::size_t balance = 0;
  std::int64_t cols = 0;
};

bool
compressed(const Recipe& recipe, std::int64_t layer, const std::string& name) {
  return compressed_weight_args(recipe, layer, fmt::format("model.layers.{}.{}", layer, name)).has_value();
}

InputReaders
input_readers(const runtime::LayerwiseModel& model, const Recipe& recipe, std::int64_t layer, LinearInput input,
              std::int64_t expert) {
  const auto& config = model.config();
  std::vector<std::string> linears, uncompressed;
  if (expert != runtime::kNotAnExpert) {
    linears.push_back(runtime::expert_linear_names(config, layer, expert)[2]);
  } else if (input == LinearInput::mlp_in && config.is_moe_layer(layer)) {
    for (const auto& l : runtime::layer_linears(config, layer))
      if (l.expert != runtime::kNotAnExpert && l.input == input)
        linears.push_back(l.name);
    const auto prefix = fmt::format("model.layers.{}.", layer).size();
    uncompressed.push_back(model::router_module(config, layer).substr(prefix));
    if (config.shared_expert_intermediate_size > 0)
      uncompressed.push_back(model::shared_expert_gate_module(layer).substr(prefix));
  } else {
    for (const auto& l : runtime::kDecoderLinears)
      if (l.input == input)
        linears.emplace_back(l.name);
  }
  InputReaders out;
  for (auto& name : linears)
    (compressed(recipe, layer, name) ? out.names : uncompressed).push_back(std::move(name));
  out.balance = out.names.size();
  out.names.insert(out.names.end(), uncompressed.begin(), uncompressed.end());
  for (const auto& name : out.names) {
    out.weights.push_back(runtime::dense_floats(model.linear(layer, name)));
    out.cols = model.linear(layer, name).cols();
  }
  return out;
}

// `weight` into the layer's linear `name`; `stored`: also into `tensors`, as the output stores it
// (a linear compress leaves alone).
void
replace_weight(runtime::LayerwiseModel& model, std::int64_t layer, const std::string& name, std::vector<float> weight,
               bool stored, std::map<std::string, std::vector<float>>& tensors) {
  const auto rows = model.linear(layer, name).rows(), cols = model.linear(layer, name).cols();
  if (stored)
    tensors[fmt::format("model.layers.{}.{}.weight", layer, name)] = weight;
  model.replace_linear(layer, name, runtime::make_owned_dense_weight(std::move(weight), rows, cols));
}

// W·diag(s) into every reader, 1/s into the producer: the norm (its stored form recorded in
// `tensors`) or the producing linear's rows (`producer`).
void
apply_factors(runtime::LayerwiseModel& model, const Recipe& recipe, std::int64_t layer, LinearInput input,
              const char* producer, InputReaders readers, const std::vector<float>& s,
              std::map<std::string, std::vector<float>>& tensors) {
  for (std::size_t i = 0; i < readers.names.size(); ++i) {
    quant::scale_columns(readers.weights[i], readers.cols, s);
    replace_weight(model, layer, readers.names[i], std::move(readers.weights[i]), i >= readers.balance, tensors);
  }
  if (producer) {
    auto weight = runtime::dense_floats(model.linear(layer, producer));
    const auto cols = static_cast<std::size_t>(model.linear(layer, producer).cols());
    for (std::size_t r = 0; r < s.size(); ++r)
      for (std::size_t c = 0; c < cols; ++c)
        weight[r * cols + c] /= s[r];
    replace_weight(model, layer, producer, std::move(weight), !compressed(recipe, layer, producer), tensors);
    return;
  }
  auto& norm = model.norm_weight(layer, input);
  for (std::size_t j = 0; j < norm.size(); ++j)
    norm[j] /= s[j];
  tensors[runtime::norm_tensor_name(model.config(), layer, input)] = runtime::stored_gain(norm, model.config());
}

// The search's candidates for `readers` (their weight statistic over all of them).
std::vector<quant::AwqCandidate>
candidates_for(const Recipe& recipe, std::span<const float> mean_abs, const InputReaders& readers) {
  const std::vector<std::span<const float>> all(readers.weights.begin(), readers.weights.end());
  const auto group = recipe.weights.strategy == quant::Strategy::group ? recipe.weights.group_size : readers.cols;
  return quant::awq_candidates(mean_abs, all, readers.cols, group, *recipe.awq);
}

// The balance layers' error through their input's Hessian (a linear parent).
double
linear_parent_error(const InputReaders& readers, const std::vector<float>& hessian, std::span<const float> s,
                    const Recipe& recipe, model::DType scale_dtype) {
  const std::vector<std::span<const float>> balance(
      readers.weights.begin(), readers.weights.begin() + static_cast<std::ptrdiff_t>(readers.balance));
  return quant::awq_linear_error(balance, readers.cols, s, hessian, recipe.weights, scale_dtype);
}

// Each expert's up_proj → down_proj (the shared expert's too), on the rows it is calibrated on; an
// expert no calibration row reached keeps s = 1.
void
smooth_expert_hidden(runtime::LayerwiseModel& model, const Recipe& recipe, std::int64_t layer,
                     const AwqStatistics& statistics, model::DType scale_dtype,
                     std::map<std::string, std::vector<float>>& tensors) {
  const auto& config = model.config();
  std::vector<std::int64_t> experts(static_cast<std::size_t>(config.num_experts));
  std::iota(experts.begin(), experts.end(), 0);
  if (config.shared_expert_intermediate_size > 0)
    experts.push_back(runtime::kSharedExpert);
  for (const auto expert : experts) {
    auto readers = input_readers(model, recipe, layer, LinearInput::mlp_hidden, expert);
    if (readers.balance == 0)
      continue;
    const auto inputs = statistics.expert_hidden(expert);
    if (inputs.tokens == 0)
      continue;
    const auto search =
        quant::search_awq(candidates_for(recipe, inputs.mean_abs, readers), [&](const quant::AwqCandidate& c) {
          return linear_parent_error(readers, inputs.hessian, c.scales, recipe, scale_dtype);
        });
    const auto up = runtime::expert_linear_names(config, layer, expert)[1];
    apply_factors(model, recipe, layer, LinearInput::mlp_hidden, up.c_str(), std::move(readers), search.best.scales,
                  tensors);
  }
}

} // namespace

void
apply_awq(runtime::LayerwiseModel& model, const Recipe& recipe, std::int64_t layer, const AwqStatistics& statistics,
          std::span<const std::int64_t> lengths, runtime::HiddenStates& x, model::DType scale_dtype,
          std::map<LinearInput, std::vector<float>>& smoothing, std::map<std::string, std::vector<float>>& tensors) {
  const auto probe = layer_probe(model, layer, lengths, x);
  for (const auto& mapping : kAwqMappings) {
    if (mapping.input == LinearInput::mlp_hidden && model.config().is_moe_layer(layer)) {
      smooth_expert_hidden(model, recipe, layer, statistics, scale_dtype, tensors);
      continue;
    }
    if (!awq_applies(model, layer, mapping) || !statistics.observed(mapping.input))
      continue;
    auto readers = input_readers(model, recipe, layer, mapping.input, runtime::kNotAnExpert);
    if (readers.balance == 0)
      continue;
    const bool parent_is_layer = !mapping.producer;
    const auto hessian = parent_is_layer ? std::vector<float>{} : statistics.hessian(mapping.input);
    const std::vector<std::string> balance(readers.names.begin(),
                                           readers.names.begin() + static_cast<std::ptrdiff_t>(readers.balance));
    const auto search = quant::search_awq(
        candidates_for(recipe, statistics.mean_abs(mapping.input), readers), [&](const quant::AwqCandidate& c) {
          return parent_is_layer
                     ? layer_output_error(model, layer, probe, balance, readers.weights, c.scales, recipe, scale_dtype)
                     : linear_parent_error(readers, hessian, c.scales, recipe, scale_dtype);
        });
    apply_factors(model, recipe, layer, mapping.input, mapping.producer, std::move(readers), search.best.scales,
                  tensors);
    smoothing.emplace(mapping.input, search.best.scales);
  }
}

} // namespace optkit::compress
