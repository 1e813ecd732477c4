#include "quant/compressed_tensors.hpp"

#include "core/error.hpp"
#include "core/json_fields.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <regex>

namespace optkit::quant {

bool
module_matches(const std::string& pattern, const std::string& name) {
  if (pattern.starts_with("re:")) {
    try {
      return std::regex_search(name, std::regex(pattern.substr(3)), std::regex_constants::match_continuous);
    } catch (const std::regex_error&) {
      throw InputError(fmt::format("'{}' is not a valid regular expression", pattern));
    }
  }
  return pattern == name;
}

bool
QuantizationConfig::ignores(const std::string& module) const {
  for (const auto& pattern : ignore)
    if (module_matches(pattern, module))
      return true;
  return false;
}

const ConfigGroup*
QuantizationConfig::group_for(const std::string& module) const {
  if (ignores(module))
    return nullptr;
  for (const auto& group : groups)
    for (const auto& target : group.targets)
      if (target != "Linear" && module_matches(target, module))
        return &group;
  for (const auto& group : groups)
    for (const auto& target : group.targets)
      if (target == "Linear")
        return &group;
  return nullptr;
}

namespace {

// "int4 group 128", "fp8 block 128x128", ... for arguments that match no preset.
std::string
arguments_in_words(const QuantArgs& a) {
  std::string shape;
  if (a.strategy == Strategy::group || a.strategy == Strategy::tensor_group)
    shape = fmt::format(" {}", a.group_size);
  else if (a.strategy == Strategy::block)
    shape = fmt::format(" {}x{}", a.block_rows, a.block_cols);
  return fmt::format("{}{} {}{}{}", a.is_float() ? "fp" : "int", a.bits, strategy_name(a.strategy), shape,
                     a.symmetric ? "" : " asymmetric");
}

// kv_cache_scheme: FP8 E4M3, symmetric, static, per tensor or per attention head (what vLLM loads).
KvScaleStrategy
read_kv_cache_scheme(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object())
    throw InputError(fmt::format("{}: expected an object of quantization arguments", where));
  const auto strategy = j.contains("strategy") && j.at("strategy").is_string() ? j.at("strategy").get<std::string>()
                                                                               : std::string("tensor");
  auto without_strategy = j; // attn_head is a KV-cache strategy only
  without_strategy.erase("strategy");
  const auto a = quant_args_from_json(without_strategy, where);
  if (!a.is_fp8() || !a.symmetric || a.dynamic || (strategy != "tensor" && strategy != "attn_head"))
    throw InputError(fmt::format("{}: optkit runs FP8 (num_bits 8, type float) symmetric static KV-cache scales per "
                                 "tensor or attn_head",
                                 where));
  return strategy == "attn_head" ? KvScaleStrategy::attn_head : KvScaleStrategy::tensor;
}

} // namespace

std::string_view
kv_scale_strategy_name(KvScaleStrategy strategy) {
  return strategy == KvScaleStrategy::attn_head ? "attn_head" : "tensor";
}

std::array<std::string, 2>
kv_scale_names(std::int64_t layer) {
  return {fmt::format("model.layers.{}.self_attn.k_scale", layer),
          fmt::format("model.layers.{}.self_attn.v_scale", layer)};
}

std::string
scheme_name(const ConfigGroup& g) {
  const auto& w = g.weights;
  const auto& a = g.input_activations;
  if (w.has_global_scale())
    return a ? "NVFP4" : "NVFP4A16";
  if (w.has_power_of_two_scales() && !a)
    return "MXFP4A16";
  if (w.is_fp8() && w.strategy == Strategy::block && a && a->strategy == Strategy::group)
    return "FP8_BLOCK";
  if (w.is_fp8() && w.strategy == Strategy::channel && a && a->strategy == Strategy::token)
    return "FP8_DYNAMIC";
  if (w.is_fp8() && w.strategy == Strategy::tensor && a)
    return "FP8";
  if (!w.is_float() && w.bits == 8 && w.strategy == Strategy::channel && a && !a->is_float() && a->bits == 8)
    return "W8A8";
  if (!w.is_float() && w.bits == 4 && w.strategy == Strategy::group && a && !a->is_float() && a->bits == 8 &&
      a->strategy == Strategy::token)
    return "W4A8";
  if (!w.is_float() && w.strategy == Strategy::group && !a)
    return fmt::format("W{}A16{}{}", w.bits, w.symmetric ? "" : "_ASYM",
                       w.group_size == 128 ? "" : fmt::format(" (group {})", w.group_size));
  return fmt::format("weights {}{}", arguments_in_words(w), a ? ", activations " + arguments_in_words(*a) : "");
}

std::string
describe(const QuantizationConfig& c) {
  std::vector<std::string> groups;
  for (const auto& g : c.groups)
    groups.push_back(fmt::format("{} on {}", scheme_name(g), fmt::join(g.targets, ", ")));
  return fmt::format("compressed-tensors {}: {}; ignored: {}{}", c.format, fmt::join(groups, "; "),
                     c.ignore.empty() ? "none" : fmt::format("{}", fmt::join(c.ignore, ", ")),
                     c.kv_cache ? fmt::format("; FP8 KV cache, scales per {}", kv_scale_strategy_name(*c.kv_cache))
                                : "");
}

std::string
infer_format(const QuantArgs& weights, const std::optional<QuantArgs>& input_activations) {
  if (weights.has_power_of_two_scales())
    return "mxfp4-pack-quantized";
  if (weights.is_fp4())
    return "nvfp4-pack-quantized";
  if (weights.is_float())
    return "float-quantized";
  if (!input_activations)
    return "pack-quantized";
  return "int-quantized";
}

nlohmann::json
to_json(const QuantizationConfig& c) {
  nlohmann::json groups = nlohmann::json::object();
  for (std::size_t i = 0; i < c.groups.size(); ++i) {
    const auto& g = c.groups[i];
    nlohmann::json group = {{"targets", g.targets}, {"weights", to_json(g.weights)}, {"output_activations", nullptr}};
    group["input_activations"] = g.input_activations ? to_json(*g.input_activations) : nlohmann::json(nullptr);
    groups[fmt::format("group_{}", i)] = std::move(group);
  }
  return {{"quant_method", "compressed-tensors"},
          {"format", c.format},
          {"quantization_status", "compressed"},
          {"config_groups", groups},
          {"ignore", c.ignore},
          {"kv_cache_scheme", c.kv_cache ? nlohmann::json{{"num_bits", 8},
                                                          {"type", "float"},
                                                          {"symmetric", true},
                                                          {"strategy", kv_scale_strategy_name(*c.kv_cache)},
                                                          {"dynamic", false},
                                                          {"group_size", nullptr}}
                                         : nlohmann::json(nullptr)},
          {"sparsity_config", nlohmann::json::object()}};
}

std::optional<QuantizationConfig>
read_quantization_config(const nlohmann::json& config_json, const std::string& source) {
  const char* key = config_json.contains("quantization_config")  ? "quantization_config"
                    : config_json.contains("compression_config") ? "compression_config"
                                                                 : nullptr;
  if (!key)
    return std::nullopt;
  const auto& q = config_json.at(key);
  const auto where = fmt::format("{}: {}", source, key);
  try {
    if (!q.is_object() || q.value("quant_method", "") != "compressed-tensors")
      throw InputError(fmt::format("{}: quant_method '{}' is not supported (optkit runs compressed-tensors "
                                   "checkpoints)",
                                   where, q.is_object() ? q.value("quant_method", "") : std::string()));
    if (q.contains("sparsity_config") && q.at("sparsity_config").is_object() &&
        q.at("sparsity_config").contains("format") && q.at("sparsity_config").at("format") != "dense")
      throw InputError(fmt::format("{}: sparse storage formats are not supported (store 2:4 weights densely)", where));
    const auto& groups = q.at("config_groups");
    if (!groups.is_object() || groups.empty())
      throw InputError(fmt::format("{}: config_groups must name at least one group", where));
    QuantizationConfig c;
    c.format = q.value("format", "");
    for (const auto& [name, group] : groups.items()) {
      const auto at = fmt::format("{}.config_groups.{}", where, name);
      // A group's own format (compressed-tensors' mixed-precision checkpoints) overrides the top level.
      const auto format = group.is_object() && group.contains("format") && group.at("format").is_string()
                              ? group.at("format").get<std::string>()
                              : c.format;
      if (format != "int-quantized" && format != "pack-quantized" && format != "float-quantized" &&
          format != "naive-quantized" && format != "nvfp4-pack-quantized" && format != "mxfp4-pack-quantized")
        throw InputError(fmt::format("{}: format '{}' is not supported (int-quantized, pack-quantized, "
                                     "float-quantized, nvfp4-pack-quantized, mxfp4-pack-quantized)",
                                     at, format));
      if (c.format.empty() || c.format == "mixed-precision")
        c.format = format;
      ConfigGroup g;
      g.targets = group.at("targets").get<std::vector<std::string>>();
      g.weights = quant_args_from_json(group.at("weights"), at + ".weights");
      validate(g.weights, false, at + ".weights");
      if (group.contains("input_activations") && !group.at("input_activations").is_null()) {
        g.input_activations = quant_args_from_json(group.at("input_activations"), at + ".input_activations");
        validate(*g.input_activations, true, at + ".input_activations");
      }
      if (!g.weights.symmetric && (g.input_activations || g.weights.strategy == Strategy::tensor))
        throw InputError(fmt::format("{}: asymmetric weights are supported weight-only, per channel or group "
                                     "(pack-quantized with weight_zero_point)",
                                     at));
      c.groups.push_back(std::move(g));
    }
    if (q.contains("ignore") && q.at("ignore").is_array())
      c.ignore = q.at("ignore").get<std::vector<std::string>>();
    if (q.contains("kv_cache_scheme") && !q.at("kv_cache_scheme").is_null())
      c.kv_cache = read_kv_cache_scheme(q.at("kv_cache_scheme"), where + ".kv_cache_scheme");
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(describe_json_error(where, e));
  }
}

} // namespace optkit::quant
