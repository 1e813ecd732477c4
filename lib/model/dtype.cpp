#include "model/dtype.hpp"

#include "core/error.hpp"

#include <string>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

namespace optkit::model {

namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  std::size_t size;
};

constexpr std::array<DTypeInfo, 8> kTypes{{
    {DType::f32, "F32", 4},
    {DType::f16, "F16", 2},
    {DType::bf16, "BF16", 2},
    {DType::f8_e4m3, "F8_E4M3", 1},
    {DType::i8, "I8", 1},
    {DType::u8, "U8", 1},
    {DType::i32, "I32", 4},
    {DType::i64, "I64", 8},
}};

const DTypeInfo&
info(DType type) {
  return kTypes[static_cast<std::size_t>(std::to_underlying(type))];
}

template <typename T>
T
load(const std::byte* data, std::size_t index) {
  T value;
  std::memcpy(&value, data + index * sizeof(T), sizeof(T));
  return value;
}

} // namespace

std::optional<DType>
parse_dtype(std::string_view name) {
  for (const auto& t : kTypes)
    if (t.name == name)
      return t.type;
  return std::nullopt;
}

std::string_view
dtype_name(DType type) {
  return info(type).name;
}

std::size_t
dtype_size(DType type) {
  return info(type).size;
}

std::string_view
supported_dtype_names() {
  return "F32, F16, BF16, F8_E4M3, I8, U8, I32, I64";
}

std::uint16_t
float_to_bf16(float value) {
  auto bits = std::bit_cast<std::uint32_t>(value);
  if (std::isnan(value))
    return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<std::uint16_t>(bits >> 16);
}

float
f16_to_float(std::uint16_t bits) {
  const std::uint32_t sign = (bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1f;
  const std::uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31)
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

std::uint16_t
float_to_f16(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000);
  if (std::isnan(value))
    return sign | 0x7e00;
  const float magnitude = std::fabs(value);
  if (magnitude >= 65520.0f)
    return sign | 0x7c00;
  if (magnitude < 6.103515625e-05f) { // subnormal: multiples of 2^-24, nearest even
    const float scaled = std::nearbyint(magnitude * 16777216.0f);
    return sign | static_cast<std::uint16_t>(scaled);
  }
  std::uint32_t m = bits & 0x7fffffffu;
  m += 0xfff + ((m >> 13) & 1);
  return sign | static_cast<std::uint16_t>((m >> 13) - (112u << 10));
}

float
f8_e4m3_to_float(std::uint8_t bits) {
  const bool negative = bits & 0x80;
  const int exponent = (bits >> 3) & 0xf;
  const int mantissa = bits & 0x7;
  float magnitude;
  if (exponent == 0xf && mantissa == 0x7)
    magnitude = std::numeric_limits<float>::quiet_NaN();
  else if (exponent == 0)
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);
  else
    magnitude = std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
  return negative ? -magnitude : magnitude;
}

float
element_as_float(DType type, const std::byte* data, std::size_t index) {
  switch (type) {
  case DType::f32:
    return load<float>(data, index);
  case DType::f16:
    return f16_to_float(load<std::uint16_t>(data, index));
  case DType::bf16:
    return bf16_to_float(load<std::uint16_t>(data, index));
  case DType::f8_e4m3:
    return f8_e4m3_to_float(load<std::uint8_t>(data, index));
  case DType::i8:
    return load<std::int8_t>(data, index);
  case DType::u8:
    return load<std::uint8_t>(data, index);
  case DType::i32:
    return static_cast<float>(load<std::int32_t>(data, index));
  case DType::i64:
    return static_cast<float>(load<std::int64_t>(data, index));
  }
  return 0.0f;
}

std::vector<std::byte>
encode_floats(std::span<const float> values, DType type) {
  if (type != DType::f32 && type != DType::bf16 && type != DType::f16)
    throw InputError("encode_floats: " + std::string(dtype_name(type)) + " is not a float storage type");
  std::vector<std::byte> out(values.size() * dtype_size(type));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (type == DType::f32) {
      std::memcpy(out.data() + 4 * i, &values[i], 4);
    } else {
      const std::uint16_t h = type == DType::bf16 ? float_to_bf16(values[i]) : float_to_f16(values[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

} // namespace optkit::model
