// Element types of tensors on disk (the safetensors dtype names) and their conversions to fp32.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace optkit::model {

enum class DType { f32, f16, bf16, f8_e4m3, i8, u8, i32, i64 };

// "F32", "BF16", "F8_E4M3", ... -> DType; nullopt for a name optkit does not read.
std::optional<DType> parse_dtype(std::string_view name);
std::string_view dtype_name(DType type);
std::size_t dtype_size(DType type);
// The supported names, comma separated, for error messages.
std::string_view supported_dtype_names();

// Inline: the portable kernels convert every weight with it, and a call per element cost more
// than the multiply-add it feeds.
inline float
bf16_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

// Round to nearest even; NaN stays NaN.
std::uint16_t float_to_bf16(float value);
float f16_to_float(std::uint16_t bits);
std::uint16_t float_to_f16(float value);
// OCP e4m3fn: bias 7, no infinities, 0x7f/0xff are NaN, max finite 448.
float f8_e4m3_to_float(std::uint8_t bits);

// fp32 values encoded as F32, BF16 or F16 bytes (round to nearest even).
std::vector<std::byte> encode_floats(std::span<const float> values, DType type);

// Reads element `index` of a buffer of `type` as fp32 (integer types convert exactly where they can).
float element_as_float(DType type, const std::byte* data, std::size_t index);

} // namespace optkit::model
