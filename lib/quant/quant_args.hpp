// How a tensor is quantized, in compressed-tensors' QuantizationArgs terms: bit width, integer or
// float grid, symmetric or not, and the strategy that decides which elements share a scale
// (tensor, channel = one per output row, group = one per row and `group_size` input columns,
// token = one per activation row, computed at run time).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace optkit::quant {

enum class NumberType { integer, floating };
enum class Strategy { tensor, channel, group, token };
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

  // The representable range: [-2^(b-1), 2^(b-1)-1] for integers, ±448 for FP8 E4M3.
  float qmin() const;
  float qmax() const;
  bool is_fp8() const { return type == NumberType::floating; }
};

std::string_view strategy_name(Strategy strategy);
std::optional<Strategy> parse_strategy(std::string_view name);
std::string_view levels_name(Levels levels);
std::optional<Levels> parse_levels(std::string_view name);

// Checks the combination the way compressed-tensors validates it (token needs dynamic, group
// needs group_size > 0, float means 8-bit E4M3, ...); `where` names it in the InputError.
void validate(const QuantArgs& args, bool activations, const std::string& where);

// compressed-tensors QuantizationArgs JSON (only the long-standing keys vLLM accepts).
nlohmann::json to_json(const QuantArgs& args);
// Reads QuantizationArgs JSON (defaults as compressed-tensors: 8 bits, int, symmetric, strategy
// inferred from group_size); `where` names it in the InputError.
QuantArgs quant_args_from_json(const nlohmann::json& json, const std::string& where);

} // namespace optkit::quant
