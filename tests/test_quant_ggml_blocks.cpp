// ggml's block quantizations: sizes, hand-built blocks decoded per ggml-common.h's layouts (Q8_0,
// Q5_0, Q5_1, Q4_K's 6-bit scale packing, Q5_K's high bits, Q6_K's split nibbles), round trips
// within each type's error, an importance vector moving error off the columns it weighs, and
// all-zero rows. (Byte-for-byte agreement with llama-quantize is conformance.gguf_llama_cpp's.)
#include "model/dtype.hpp"
#include "quant/ggml_blocks.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace optkit;
using model::GgmlType;

namespace {

std::vector<float>
random_row(std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (auto& v : x)
    v = normal(engine);
  return x;
}

std::vector<float>
round_trip(GgmlType type, const std::vector<float>& x, const std::vector<float>& importance = {}) {
  std::vector<std::byte> bytes(static_cast<std::size_t>(model::ggml_row_bytes(type, std::ssize(x))));
  quant::quantize_row(type, x, importance, bytes.data());
  std::vector<float> y(x.size());
  quant::dequantize_row(type, bytes.data(), std::ssize(x), y.data());
  return y;
}

// Σ w·(x − y)² / Σ w·x² (w = 1 when empty).
double
relative_error(const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& w = {}) {
  double error = 0, norm = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double weight = w.empty() ? 1.0 : double(w[i]);
    error += weight * (double(x[i]) - double(y[i])) * (double(x[i]) - double(y[i]));
    norm += weight * double(x[i]) * double(x[i]);
  }
  return error / norm;
}

void
put_f16(std::vector<std::uint8_t>& b, std::size_t at, float v) {
  const auto bits = model::float_to_f16(v);
  b[at] = static_cast<std::uint8_t>(bits & 0xff);
  b[at + 1] = static_cast<std::uint8_t>(bits >> 8);
}

std::vector<float>
decode(GgmlType type, const std::vector<std::uint8_t>& block, std::int64_t values) {
  std::vector<float> y(static_cast<std::size_t>(values));
  quant::dequantize_row(type, reinterpret_cast<const std::byte*>(block.data()), values, y.data());
  return y;
}

} // namespace

TEST_CASE("block sizes are ggml-common.h's") {
  CHECK(model::ggml_row_bytes(GgmlType::q8_0, 256) == 8 * 34);
  CHECK(model::ggml_row_bytes(GgmlType::q5_0, 64) == 2 * 22);
  CHECK(model::ggml_row_bytes(GgmlType::q5_1, 64) == 2 * 24);
  CHECK(model::ggml_row_bytes(GgmlType::q4_k, 512) == 2 * 144);
  CHECK(model::ggml_row_bytes(GgmlType::q5_k, 256) == 176);
  CHECK(model::ggml_row_bytes(GgmlType::q6_k, 256) == 210);
  CHECK(model::ggml_row_bytes(GgmlType::f16, 10) == 20);
  CHECK(model::ggml_type_from_id(14) == GgmlType::q6_k);
  CHECK_FALSE(model::ggml_type_from_id(2).has_value()); // Q4_0: not one optkit reads
}

TEST_CASE("Q8_0 decodes d·q and rounds half away from zero") {
  std::vector<std::uint8_t> block(34, 0);
  put_f16(block, 0, 0.5f);
  block[2] = 4;
  block[3] = static_cast<std::uint8_t>(-3);
  block[33] = static_cast<std::uint8_t>(127);
  const auto y = decode(GgmlType::q8_0, block, 32);
  CHECK(y[0] == 2.0f);
  CHECK(y[1] == -1.5f);
  CHECK(y[31] == 63.5f);
  // amax 127 → d = 1: 2.5 rounds to 3 and −2.5 to −3 (roundf), not to even.
  std::vector<float> x(32, 0.0f);
  x[0] = 127;
  x[1] = 2.5f;
  x[2] = -2.5f;
  const auto q = round_trip(GgmlType::q8_0, x);
  CHECK(q[1] == 3.0f);
  CHECK(q[2] == -3.0f);
}

TEST_CASE("Q5_0 and Q5_1 keep the fifth bit of value j in bit j of qh") {
  std::vector<std::uint8_t> q50(22, 0);
  put_f16(q50, 0, 1.0f);
  q50[2] = 0x01;  // qh bit 0: value 0's fifth bit
  q50[5] = 0x80;  // qh bit 31: value 31's
  q50[6] = 0x3f;  // value 0 low nibble 15, value 16 low nibble 3
  q50[21] = 0xf0; // value 31's low nibble 15
  const auto y = decode(GgmlType::q5_0, q50, 32);
  CHECK(y[0] == 31 - 16); // 15 | 16
  CHECK(y[16] == 3 - 16);
  CHECK(y[31] == 31 - 16);
  CHECK(y[1] == -16);
  std::vector<std::uint8_t> q51(24, 0);
  put_f16(q51, 0, 0.5f);
  put_f16(q51, 2, -1.0f);
  q51[8] = 0x21; // value 0: 1, value 16: 2
  const auto z = decode(GgmlType::q5_1, q51, 32);
  CHECK(z[0] == -0.5f);
  CHECK(z[16] == 0.0f);
  CHECK(z[5] == -1.0f);
}

TEST_CASE("Q4_K unpacks its 6-bit scales and mins (get_scale_min_k4) and its nibbles by 64-value chunk") {
  std::vector<std::uint8_t> block(144, 0);
  put_f16(block, 0, 1.0f); // d
  put_f16(block, 2, 0.5f); // dmin
  std::uint8_t* s = block.data() + 4;
  s[0] = 2;            // sub-block 0: scale 2
  s[4] = 4;            // sub-block 0: min 4
  s[1] = 3 | (1 << 6); // sub-block 1: scale 3; the high bits of sub-block 5's scale
  s[9] = 0x21;         // sub-block 5: scale low nibble 1 (→ 1 | 1<<4 = 17), min low nibble 2
  s[5] = 1 | (2 << 6); // sub-block 1: min 1; the high bits of sub-block 5's min (→ 2 | 2<<4 = 34)
  std::uint8_t* qs = block.data() + 16;
  qs[0] = 0x75;      // value 0 (sub-block 0): 5; value 32 (sub-block 1): 7
  qs[64 + 3] = 0x90; // chunk 2, l = 3: value 128+3 (sub-block 4) 0, value 160+3 (sub-block 5) 9
  const auto y = decode(GgmlType::q4_k, block, 256);
  CHECK(y[0] == doctest::Approx(2 * 5 - 0.5 * 4));
  CHECK(y[32] == doctest::Approx(3 * 7 - 0.5 * 1));
  CHECK(y[160 + 3] == doctest::Approx(17 * 9 - 0.5 * 34));
}

TEST_CASE("Q5_K's high bit of value 64c+l is bit 2c of qh[l], of value 64c+32+l bit 2c+1") {
  std::vector<std::uint8_t> block(176, 0);
  put_f16(block, 0, 1.0f);
  put_f16(block, 2, 0.0f);
  for (std::size_t j = 0; j < 4; ++j)
    block[4 + j] = 1; // sub-blocks 0-3 scale 1
  block[4 + 8] = 1;   // sub-blocks 4 and 5: scale 1 (low nibble), 0 min
  block[4 + 9] = 1;
  block[16 + 5] = 1 << 4;    // qh[5] bit 4 (c = 2): value 128+5 gets 16
  block[16 + 6] = 1 << 5;    // qh[6] bit 5 (c = 2, upper half): value 160+6 gets 16
  block[48 + 64 + 6] = 0x30; // chunk 2, l = 6: value 160+6's low nibble 3
  const auto y = decode(GgmlType::q5_k, block, 256);
  CHECK(y[128 + 5] == 16.0f);
  CHECK(y[160 + 6] == 19.0f);
  CHECK(y[5] == 0.0f);
}

TEST_CASE("Q6_K splits values over ql nibbles and qh pairs, 16 int8 scales, d last") {
  std::vector<std::uint8_t> block(210, 0);
  for (std::size_t i = 0; i < 16; ++i)
    block[192 + i] = static_cast<std::uint8_t>(i + 1);
  put_f16(block, 208, 0.25f);
  // value 96+l of the first half: ql[32+l] >> 4 and qh[l] bits 6-7; l = 2, q = 0x2a → 42 − 32 = 10.
  block[32 + 2] = 0xa0;
  block[128 + 2] = 2 << 6;
  const auto y = decode(GgmlType::q6_k, block, 256);
  CHECK(y[96 + 2] == doctest::Approx(0.25 * 7 * 10)); // scale index (96+2)/16 = 6 → 7
  CHECK(y[0] == doctest::Approx(0.25 * 1 * -32));
}

TEST_CASE("every type round-trips a row within its error") {
  const auto x = random_row(1024, 7);
  CHECK(relative_error(x, round_trip(GgmlType::f32, x)) == 0.0);
  CHECK(relative_error(x, round_trip(GgmlType::f16, x)) < 1e-6);
  CHECK(relative_error(x, round_trip(GgmlType::bf16, x)) < 1e-4);
  CHECK(relative_error(x, round_trip(GgmlType::q8_0, x)) < 2e-4);
  CHECK(relative_error(x, round_trip(GgmlType::q6_k, x)) < 2e-3);
  CHECK(relative_error(x, round_trip(GgmlType::q5_k, x)) < 5e-3);
  CHECK(relative_error(x, round_trip(GgmlType::q5_1, x)) < 5e-3);
  CHECK(relative_error(x, round_trip(GgmlType::q5_0, x)) < 5e-3);
  CHECK(relative_error(x, round_trip(GgmlType::q4_k, x)) < 2e-2);
}

TEST_CASE("an importance vector moves error off the columns it weighs") {
  const auto x = random_row(512, 11);
  std::vector<float> importance(512, 0.01f);
  for (std::size_t i = 0; i < importance.size(); i += 4)
    importance[i] = 100.0f; // a quarter of the columns matter
  for (const auto type : {GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k, GgmlType::q5_0, GgmlType::q5_1}) {
    CAPTURE(model::ggml_type_name(type));
    const double plain = relative_error(x, round_trip(type, x), importance);
    const double weighted = relative_error(x, round_trip(type, x, importance), importance);
    CHECK(weighted < plain);
  }
}

TEST_CASE("an all-zero row stays zero in every type") {
  const std::vector<float> x(256, 0.0f);
  for (const auto type :
       {GgmlType::q8_0, GgmlType::q5_0, GgmlType::q5_1, GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k}) {
    CAPTURE(model::ggml_type_name(type));
    for (const float v : round_trip(type, x))
      CHECK(v == 0.0f);
  }
}
