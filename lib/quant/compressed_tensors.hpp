// The `quantization_config` of a compressed-tensors checkpoint (what vLLM dispatches on): config
// groups, each with its targets (the class name Linear, exact module names or re:<regex>) and its
// weight and optional input-activation arguments — one group for a uniform recipe, one per
// bitwidth for a mixed-precision plan — the format (int-quantized, pack-quantized,
// float-quantized, nvfp4-pack-quantized, mxfp4-pack-quantized), the ignore list, and
// `sparsity_config: {}` (current vLLM rejects any sparsity config with targets, so 2:4-pruned
// weights are stored densely). Only long-standing keys are written: compressed-tensors validates
// with extra="forbid", and a newer key breaks older vLLM.
#pragma once

#include "quant/quant_args.hpp"

#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace optkit::quant {

struct ConfigGroup {
  std::vector<std::string> targets = {"Linear"};
  QuantArgs weights;
  std::optional<QuantArgs> input_activations;
};

// An FP8 E4M3 KV cache with static scales (compressed-tensors' kv_cache_scheme): K and V divided
// by model.layers.N.self_attn.k_scale / v_scale ([1] per tensor, [kv_heads, 1, 1] per head,
// max|K| / 448 over the calibration set) before they are cast, as vLLM's --kv-cache-dtype fp8 does.
enum class KvScaleStrategy { tensor, attn_head };
std::string_view kv_scale_strategy_name(KvScaleStrategy strategy);
// The layer's K and V scale tensors, in that order.
std::array<std::string, 2> kv_scale_names(std::int64_t layer);

struct QuantizationConfig {
  std::string format; // int-quantized | pack-quantized | float-quantized
  std::vector<ConfigGroup> groups;
  std::vector<std::string> ignore; // module names or re:<regex>
  std::optional<KvScaleStrategy> kv_cache;

  // Whether the module (an HF path such as model.layers.0.mlp.down_proj) is left unquantized.
  bool ignores(const std::string& module) const;
  // The group that quantizes a linear module, as vLLM matches it: the first group naming the
  // module (exactly or by re:<regex>), else the first group targeting the class Linear; nullptr
  // when the module is ignored or no group targets it.
  const ConfigGroup* group_for(const std::string& module) const;
};

// The format compressed-tensors infers: weight-only int → pack-quantized; int weights with
// activations → int-quantized; FP4 weights → mxfp4-pack-quantized (groups of 32) or
// nvfp4-pack-quantized; FP8 weights → float-quantized.
std::string infer_format(const QuantArgs& weights, const std::optional<QuantArgs>& input_activations);

nlohmann::json to_json(const QuantizationConfig& config);

// The config's quantization_config, nullopt when it has none. InputError (naming `source`) for a
// quant_method other than compressed-tensors, no config group, or arguments optkit's runtime
// cannot run.
std::optional<QuantizationConfig> read_quantization_config(const nlohmann::json& config_json,
                                                           const std::string& source);

// The compressed-tensors preset a config group is (W4A16, W4A16_ASYM, W8A16, W8A8, W4A8, FP8,
// FP8_DYNAMIC, FP8_BLOCK, NVFP4, NVFP4A16, MXFP4A16), or its arguments in a few words.
std::string scheme_name(const ConfigGroup& group);
// One line for people: the format, each group's scheme and targets, and what is ignored.
std::string describe(const QuantizationConfig& config);

// Whether `name` matches an ignore/target entry: exact, or re:<regex> matched from the start.
bool module_matches(const std::string& pattern, const std::string& name);

} // namespace optkit::quant
