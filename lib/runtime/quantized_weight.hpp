// Quantized linear weights of compressed-tensors checkpoints behind the runtime's LinearWeight
// interface: int8 per-channel (int-quantized), packed int4/int8 per-group or per-channel
// (pack-quantized) and FP8 E4M3 per-channel or per-tensor (float-quantized). Rows are
// dequantized to fp32 as they are used (the weights stay in their compact form in the mapped
// file), and inputs are quantized per token first when the checkpoint quantizes activations
// dynamically, so results match what a W8A8 serving kernel computes.
#pragma once

#include "quant/quant_args.hpp"
#include "runtime/linear_weight.hpp"

#include <optional>
#include <span>
#include <vector>

namespace optkit::runtime {

enum class QuantizedStorage { int8_values, packed_int32, fp8_values };

struct QuantizedWeightSpec {
  QuantizedStorage storage = QuantizedStorage::int8_values;
  std::int64_t rows = 0, cols = 0;
  int bits = 8;
  std::span<const std::byte> values; // I8 [rows, cols], I32 [rows, words] or F8_E4M3 [rows, cols]
  std::vector<float> scales;         // rows x groups (a tensor scale repeated per row)
  std::int64_t group_size = 0;       // columns per scale
  std::optional<quant::QuantArgs> input_activations;
};

std::unique_ptr<LinearWeight> make_quantized_weight(QuantizedWeightSpec spec);

} // namespace optkit::runtime
