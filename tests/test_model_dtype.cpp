// Element conversions against values computed by hand from the IEEE / OCP bit layouts.
#include "model/dtype.hpp"

#include <bit>
#include <cmath>
#include <doctest/doctest.h>
#include <limits>

using namespace optkit::model;

TEST_CASE("bf16 rounds to nearest even and keeps NaN") {
  CHECK(float_to_bf16(1.0f) == 0x3f80);
  CHECK(bf16_to_float(0xc040) == -3.0f);
  // 1 + 2^-8 is exactly halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even (1.0)
  CHECK(float_to_bf16(1.0f + 1.0f / 256.0f) == 0x3f80);
  CHECK(float_to_bf16(1.0f + 3.0f / 256.0f) == 0x3f82);
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("f16 covers normals, subnormals, overflow and round trips") {
  CHECK(float_to_f16(1.0f) == 0x3c00);
  CHECK(float_to_f16(-2.0f) == 0xc000);
  CHECK(f16_to_float(0x7bff) == 65504.0f);
  CHECK(f16_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(float_to_f16(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(float_to_f16(70000.0f) == 0x7c00);
  CHECK(std::isinf(f16_to_float(0x7c00)));
  for (std::uint32_t bits = 0; bits < 0x7c00; bits += 7)
    CHECK(float_to_f16(f16_to_float(static_cast<std::uint16_t>(bits))) == bits);
}

TEST_CASE("f8 e4m3fn decodes its extremes") {
  CHECK(f8_e4m3_to_float(0x7e) == 448.0f);
  CHECK(f8_e4m3_to_float(0xfe) == -448.0f);
  CHECK(f8_e4m3_to_float(0x01) == std::ldexp(1.0f, -9)); // smallest subnormal
  CHECK(f8_e4m3_to_float(0x08) == std::ldexp(1.0f, -6)); // smallest normal
  CHECK(std::isnan(f8_e4m3_to_float(0x7f)));
  CHECK(f8_e4m3_to_float(0x38) == 1.0f);
}

TEST_CASE("dtype names parse and unknown names do not") {
  CHECK(parse_dtype("BF16") == DType::bf16);
  CHECK(parse_dtype("F8_E4M3") == DType::f8_e4m3);
  CHECK_FALSE(parse_dtype("F8_E5M2").has_value());
  CHECK(dtype_size(DType::i64) == 8);
  CHECK(dtype_name(DType::u8) == "U8");
}
