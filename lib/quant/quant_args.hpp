// How a tensor is quantized, in compressed-tensors' QuantizationArgs terms: bit width, integer or
// float grid (8-bit float: FP8 E4M3; 4-bit float: FP4 E2M1), symmetric or not, and the strategy
// that decides which elements share a scale: tensor; channel = one per output row; group = one
// per row and `group_size` input columns (FP4 in groups of 32 is MXFP4: power-of-two E8M0
// scales); block = one per `block_structure` [rows, cols] tile (FP8 block, DeepSeek-V3 style);
// tensor_group = groups of `group_size` whose FP8 E4M3 scales sit under one FP32 global scale
// (NVFP4); token = one per activation row, computed at run time.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace optkit::quant {

enum class NumberType { integer, floating };
enum class Strategy { tensor, channel, group, block, tensor_group, token };
// Where a symmetric integer grid puts its levels. Mid-tread (compressed-tensors, what vLLM
// loads): q·s for q in [qmin, qmax], zero representable, one level more on the negative side.
// Mid-rise (optkit's delta format only): (q + ½)·s, no zero level, symmetric, so every level
// carries a value — for the kept values of a 2:4 mask, whose zeros the mask already stores.
enum class Levels { midtread, midrise };

struct QuantArgs {
  int bits = 8;
  NumberType type = NumberType::integer;
  bool symmetric = true;
  Strategy strategy = Strategy::channel;
  std::int64_t group_size = 0; // > 0 only with the group strategy
  bool dynamic = false;        // scales computed per call from the data (activations)
  Levels levels = Levels::midtread;
  std::int64_t block_rows = 0, block_cols = 0; // block strategy only: the tile one scale covers
  // compressed-tensors' dynamic "local" (NVFP4 activations): the group scales are computed per
  // call, under a global scale calibrated once. Implies `dynamic`.
  bool dynamic_local = false;

  // The representable range: [-2^(b-1), 2^(b-1)-1] for integers, ±448 for FP8 E4M3, ±6 for FP4 E2M1.
  float qmin() const;
  float qmax() const;
  bool is_float() const { return type == NumberType::floating; }
  bool is_fp8() const { return is_float() && bits == 8; }
  bool is_fp4() const { return is_float() && bits == 4; }
  // MXFP4: FP4 in groups of 32 with E8M0 (power-of-two) scales, compressed-tensors' rule.
  bool has_power_of_two_scales() const { return is_fp4() && strategy == Strategy::group && group_size == 32; }
  // NVFP4: FP8 group scales under one FP32 global scale per tensor.
  bool has_global_scale() const { return strategy == Strategy::tensor_group; }
};

std::string_view strategy_name(Strategy strategy);
std::optional<Strategy> parse_strategy(std::string_view name);
std::string_view levels_name(Levels levels);
std::optional<Levels> parse_levels(std::string_view name);

// Checks the combination the way compressed-tensors validates it (token needs dynamic, group
// needs group_size > 0, block needs block_structure, float means 8-bit E4M3 or 4-bit E2M1, ...)
// and what optkit runs (FP4 is symmetric, NVFP4 groups of 16, MXFP4 groups of 32, FP8 blocks);
// `where` names it in the InputError.
void validate(const QuantArgs& args, bool activations, const std::string& where);

// compressed-tensors QuantizationArgs JSON (only the long-standing keys vLLM accepts).
nlohmann::json to_json(const QuantArgs& args);
// Reads QuantizationArgs JSON (defaults as compressed-tensors: 8 bits, int, symmetric, strategy
// inferred from group_size); `where` names it in the InputError.
QuantArgs quant_args_from_json(const nlohmann::json& json, const std::string& where);

} // namespace optkit::quant
