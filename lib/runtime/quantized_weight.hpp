// Quantized linear weights of compressed-tensors checkpoints behind the runtime's LinearWeight
// interface: int8 per-channel (int-quantized), packed int4/int8 per-group or per-channel
// (pack-quantized), FP8 E4M3 per-channel, per-tensor or per block (float-quantized) and FP4 E2M1
// two to a byte with FP8 group scales under a global scale (nvfp4-pack-quantized) or E8M0 group
// scales (mxfp4-pack-quantized). Rows are
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

enum class QuantizedStorage { int8_values, packed_int32, fp8_values, fp4_packed };

// How FP4 group scales are stored: NVFP4's FP8 E4M3 codes, read as value / global scale, or
// MXFP4's E8M0 exponents, read as 2^(code − 127).
enum class Fp4Scales { fp8_under_global, e8m0 };

struct QuantizedWeightSpec {
  QuantizedStorage storage = QuantizedStorage::int8_values;
  std::int64_t rows = 0, cols = 0;
  int bits = 8;
  std::span<const std::byte> values; // I8 [rows, cols], I32 [rows, words], F8_E4M3 [rows, cols] or U8 [rows, cols/2]
  std::vector<float> scales;         // rows x groups (a tensor or block scale repeated); empty for FP4
  std::int64_t group_size = 0;       // columns per scale
  std::optional<quant::QuantArgs> input_activations;
  // FP4 only: the group scale codes in place, [rows, groups] bytes, and how to read them.
  std::span<const std::byte> scale_codes;
  Fp4Scales fp4_scales = Fp4Scales::fp8_under_global;
  float global_scale = 0;       // NVFP4 weights' global scale
  float input_global_scale = 0; // NVFP4 activations' global scale (calibrated)
  std::vector<float> zeros;     // rows x groups: an asymmetric grid's zero points (value = (q − z)·s); else empty
};

std::unique_ptr<LinearWeight> make_quantized_weight(QuantizedWeightSpec spec);

} // namespace optkit::runtime
