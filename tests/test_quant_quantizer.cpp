// Golden vectors for the compressed-tensors grid: int4 packing, FP8 E4M3 encoding (clamp to ±448,
// round half to even, subnormals), symmetric scales (/127.5, /7.5, /448) and round-half-even; FP4
// E2M1 rounding and packing, MXFP4's E8M0 and NVFP4's global and FP8 group scales, FP8 blocks,
// group and NVFP4 activations, the float schemes' validation; AWQ's candidate factors.
#include "core/error.hpp"
#include "model/dtype.hpp"
#include "quant/awq.hpp"
#include "quant/awq_clip.hpp"
#include "quant/compressed_tensors.hpp"
#include "quant/gptq.hpp"
#include "quant/packing.hpp"
#include "quant/quantizer.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

using namespace optkit;
using quant::NumberType;
using quant::QuantArgs;
using quant::Strategy;

TEST_CASE("int4 packing matches compressed-tensors' pack_to_int32 test vector") {
  const std::vector<std::int8_t> q = {-8, -7, -1, 0, 1, 2, 6, 7};
  const auto words = quant::pack_rows(q, 1, 8, 4);
  REQUIRE(words.size() == 1);
  CHECK(static_cast<std::uint32_t>(words[0]) == 0xFEA98710u);
  CHECK(words[0] == -22444272);
  CHECK(quant::unpack_rows(words, 1, 8, 4) == q);
}

TEST_CASE("packing pads a row to whole words and unpacks what it packed") {
  std::vector<std::int8_t> q;
  for (int i = 0; i < 2 * 11; ++i)
    q.push_back(static_cast<std::int8_t>((i * 5) % 16 - 8));
  const auto words = quant::pack_rows(q, 2, 11, 4);
  CHECK(words.size() == 4); // 11 values → 2 words per row
  CHECK(quant::unpack_rows(words, 2, 11, 4) == q);
  std::vector<std::int8_t> two = {-2, -1, 0, 1, 1, 0, -1, -2, -2, 1};
  CHECK(quant::unpack_rows(quant::pack_rows(two, 1, 10, 2), 1, 10, 2) == two);
  std::vector<std::int8_t> eight = {-128, -1, 0, 127, 5};
  const auto w8 = quant::pack_rows(eight, 1, 5, 8);
  CHECK(static_cast<std::uint32_t>(w8[0]) == 0xFF807F00u); // -128, -1, 0, 127 offset by 128: 0, 127, 128, 255
  CHECK(quant::unpack_rows(w8, 1, 5, 8) == eight);
  // 3 bits: ten values per word in bits [0, 30), the top two bits zero (pack_factor = 32 // 3).
  std::vector<std::int8_t> three = {-4, -3, -2, -1, 0, 1, 2, 3, 3, -4, 1};
  const auto w3 = quant::pack_rows(three, 1, 11, 3);
  REQUIRE(w3.size() == 2);
  std::uint32_t expected = 0;
  for (int i = 0; i < 10; ++i)
    expected |= static_cast<std::uint32_t>(three[static_cast<std::size_t>(i)] + 4) << (3 * i);
  CHECK(static_cast<std::uint32_t>(w3[0]) == expected);
  CHECK((static_cast<std::uint32_t>(w3[0]) >> 30) == 0u);
  CHECK(static_cast<std::uint32_t>(w3[1]) == 5u); // column 10: 1 + 4
  CHECK(quant::unpack_rows(w3, 1, 11, 3) == three);
}

TEST_CASE("FP8 E4M3 encoding: exact values, round half to even, subnormals, saturation") {
  CHECK(quant::float_to_f8_e4m3(448.0f) == 0x7e);
  CHECK(quant::float_to_f8_e4m3(-448.0f) == 0xfe);
  CHECK(quant::float_to_f8_e4m3(1.0f) == 0x38);
  CHECK(quant::float_to_f8_e4m3(0.5f) == 0x30);
  CHECK(quant::float_to_f8_e4m3(240.0f) == 0x77);
  CHECK(quant::float_to_f8_e4m3(std::ldexp(1.0f, -6)) == 0x08);      // smallest normal
  CHECK(quant::float_to_f8_e4m3(std::ldexp(1.0f, -9)) == 0x01);      // smallest subnormal
  CHECK(quant::float_to_f8_e4m3(std::ldexp(1.0f, -10)) == 0x00);     // half of it: ties to even (0)
  CHECK(quant::float_to_f8_e4m3(3 * std::ldexp(1.0f, -10)) == 0x02); // 1.5 units: ties to even (2)
  CHECK(quant::float_to_f8_e4m3(1.0625f) == 0x38);                   // halfway 1.0 / 1.125 → even mantissa 0
  CHECK(quant::float_to_f8_e4m3(1.1875f) == 0x3a);                   // halfway 1.125 / 1.25 → even mantissa 2
  CHECK(quant::float_to_f8_e4m3(-0.0f) == 0x80);
  CHECK(quant::float_to_f8_e4m3(464.0f) == 0x7e); // saturates (callers clamp first)
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7f) == 0x7f)
      continue; // NaN
    const float v = model::f8_e4m3_to_float(static_cast<std::uint8_t>(code));
    if (v == 0.0f)
      continue;
    CHECK(quant::float_to_f8_e4m3(v) == code); // every finite code round-trips
  }
}

TEST_CASE("FP8 quantization clamps to ±448 before the cast") {
  QuantArgs fp8{8, NumberType::floating, true, Strategy::channel, 0, false};
  CHECK(quant::quantize_value(1000.0f, 1.0f, 0.0f, fp8) == 448.0f);
  CHECK(quant::quantize_value(-1000.0f, 1.0f, 0.0f, fp8) == -448.0f);
  CHECK(quant::quantize_value(3.3f, 1.0f, 0.0f, fp8) == 3.25f);
}

TEST_CASE("symmetric scales are max|x| / ((qmax - qmin) / 2) and integers round half to even") {
  QuantArgs int8{8, NumberType::integer, true, Strategy::channel, 0, false};
  QuantArgs int4{4, NumberType::integer, true, Strategy::group, 2, false};
  QuantArgs fp8{8, NumberType::floating, true, Strategy::channel, 0, false};
  CHECK(quant::scale_for_range(-127.5f, 10.0f, int8, model::DType::f32).scale == doctest::Approx(1.0));
  CHECK(quant::scale_for_range(-1.0f, 7.5f, int4, model::DType::f32).scale == doctest::Approx(1.0));
  CHECK(quant::scale_for_range(0.0f, 448.0f, fp8, model::DType::f32).scale == doctest::Approx(1.0));
  CHECK(quant::quantize_value(0.5f, 1.0f, 0.0f, int8) == 0.0f);
  CHECK(quant::quantize_value(1.5f, 1.0f, 0.0f, int8) == 2.0f);
  CHECK(quant::quantize_value(2.5f, 1.0f, 0.0f, int8) == 2.0f);
  CHECK(quant::quantize_value(-200.0f, 1.0f, 0.0f, int8) == -128.0f); // clamp before rounding
  // Scales are stored in the model dtype: BF16 keeps 8 significant bits.
  const auto bf16 = quant::scale_for_range(0.0f, 1.0f, int8, model::DType::bf16).scale;
  CHECK(bf16 == model::bf16_to_float(model::float_to_bf16(1.0f / 127.5f)));
  // Asymmetric: scale (max - min) / 15, signed zero point.
  QuantArgs asym = int4;
  asym.symmetric = false;
  const auto sz = quant::scale_for_range(-1.0f, 2.0f, asym, model::DType::f32);
  CHECK(sz.scale == doctest::Approx(0.2));
  CHECK(sz.zero == -3.0f); // round(-8 + 1/0.2)
}

TEST_CASE("a mid-rise int2 grid has the levels ±½s and ±1.5s, ±max|x| at the ends, and no zero") {
  QuantArgs int2{2, NumberType::integer, true, Strategy::group, 4, false};
  int2.levels = quant::Levels::midrise;
  const auto sz = quant::scale_for_range(-1.0f, 3.0f, int2, model::DType::f32);
  CHECK(sz.scale == doctest::Approx(2.0)); // 3 / 1.5
  CHECK(sz.zero == -0.5f);
  auto level = [&](float x) { return quant::fake_quantize(x, sz.scale, sz.zero, int2); };
  CHECK(level(3.0f) == 3.0f);
  CHECK(level(2.1f) == 3.0f);
  CHECK(level(1.9f) == 1.0f);
  CHECK(level(0.1f) == 1.0f);
  CHECK(level(-0.1f) == -1.0f);
  CHECK(level(-3.0f) == -3.0f);
  CHECK(level(-9.0f) == -3.0f); // clamped: the grid is symmetric, unlike mid-tread's -2s..s
  CHECK(level(0.0f) == 1.0f);   // -½ rounds half to even, to 0: the level +½s
  QuantArgs tread = int2;
  tread.levels = quant::Levels::midtread;
  const auto t = quant::scale_for_range(-1.0f, 3.0f, tread, model::DType::f32);
  CHECK(quant::fake_quantize(3.0f, t.scale, t.zero, tread) == 2.0f); // mid-tread clips +max to +s
  CHECK_THROWS_AS(quant::validate(
                      [] {
                        QuantArgs a{2, NumberType::integer, false, Strategy::group, 4, false};
                        a.levels = quant::Levels::midrise;
                        return a;
                      }(),
                      false, "w"),
                  InputError);
}

TEST_CASE("group grids: one scale per row and group, a narrower last group allowed") {
  QuantArgs int4{4, NumberType::integer, true, Strategy::group, 4, false};
  const std::vector<float> w = {1, -2, 3, 7.5f, 0.75f, 0, 0, 0, -15, 1, 1, 1, 2, 2, 0, 0, 0, 0};
  const auto g = quant::compute_grid(w, 2, 9, int4, model::DType::f32);
  CHECK(g.groups() == 3);
  CHECK(g.scale_at(0, 0) == doctest::Approx(1.0));
  CHECK(g.scale_at(0, 5) == doctest::Approx(0.1));
  CHECK(g.scale_at(0, 8) == doctest::Approx(2.0));
  CHECK(g.scale_at(1, 8) ==
        doctest::Approx(static_cast<double>(std::numeric_limits<float>::epsilon()))); // all zero: eps
}

TEST_CASE("dynamic per-token activation quantization: int8 absmax/127 per row, FP8 absmax/448") {
  QuantArgs int8{8, NumberType::integer, true, Strategy::token, 0, true};
  std::vector<float> x = {127, 0.6f, -63.5f, 1, 0.004f, 0.002f};
  quant::fake_quantize_activations(x.data(), 2, 3, int8);
  CHECK(x[0] == 127.0f);
  CHECK(x[1] == 1.0f);
  CHECK(x[2] == -64.0f); // -63.5 → -64 (ties to even)
  CHECK(x[3] == 1.0f);   // row 2 has its own scale 1/127
  CHECK(x[4] == doctest::Approx(static_cast<double>(1.0f / 127 * 1)));
  QuantArgs fp8{8, NumberType::floating, true, Strategy::token, 0, true};
  std::vector<float> y = {448, 3.3f};
  quant::fake_quantize_activations(y.data(), 1, 2, fp8);
  CHECK(y[1] == 3.25f);
}

namespace {

QuantArgs
nvfp4_weights() {
  QuantArgs a{4, NumberType::floating, true, Strategy::tensor_group, 16, false};
  return a;
}

} // namespace

TEST_CASE("FP4 E2M1 rounding: compressed-tensors' thresholds, ties to the even code, ±6 at the ends") {
  // Each tie between two levels goes to the one whose code is even.
  const std::vector<std::pair<float, float>> cases = {{0.25f, 0.0f}, {0.26f, 0.5f}, {0.75f, 1.0f}, {1.25f, 1.0f},
                                                      {1.26f, 1.5f}, {1.75f, 2.0f}, {2.5f, 2.0f},  {2.51f, 3.0f},
                                                      {3.5f, 4.0f},  {5.0f, 4.0f},  {5.05f, 6.0f}, {6.0f, 6.0f}};
  for (const auto& c : cases) {
    const float x = c.first, want = c.second; // not a structured binding: CAPTURE's lambda (clang 14)
    CAPTURE(x);
    CHECK(quant::round_to_fp4(x) == want);
    CHECK(quant::round_to_fp4(-x) == -want);
  }
  // Through BF16 first: 0.2500001 is 0.25 in BF16, so it rounds to 0 as compressed-tensors' cast does.
  CHECK(quant::round_to_fp4(0.2500001f) == 0.0f);
  CHECK(quant::round_to_fp4(5.01f) == 4.0f); // 5.0 in BF16: the tie goes to 4
  // A small negative value is −0, whose code carries the sign bit (compressed-tensors' sign · 0).
  CHECK(std::signbit(quant::round_to_fp4(-0.1f)));
  CHECK(quant::fp4_code(quant::round_to_fp4(-0.1f)) == 0x8);
  for (std::uint8_t code = 0; code < 16; ++code) {
    CAPTURE(int(code));
    CHECK(quant::fp4_code(quant::fp4_value(code)) == code);
  }
  const std::vector<std::uint8_t> codes = {0x1, 0xF, 0x7, 0x8};
  CHECK(quant::pack_fp4_rows(codes, 1, 4) == std::vector<std::uint8_t>{0xF1, 0x87});
  const auto packed = quant::pack_fp4_rows(codes, 1, 4);
  for (std::int64_t c = 0; c < 4; ++c)
    CHECK(quant::unpack_fp4_code(packed.data(), c) == codes[static_cast<std::size_t>(c)]);
}

TEST_CASE("MXFP4 scales are 2^(e-127): the BF16 max rounded up to a power of two from 1.75, over 4") {
  CHECK(quant::mxfp4_scale_code(1.0f) == 125); // 1 → scale ¼: the max lands on 4
  CHECK(quant::e8m0_to_float(125) == 0.25f);
  CHECK(quant::mxfp4_scale_code(1.7f) == 125);  // below 1.75: stays at 1 (the max clamps to 6)
  CHECK(quant::mxfp4_scale_code(1.75f) == 126); // from 1.75 up: 2
  CHECK(quant::mxfp4_scale_code(-3.0f) == 126);
  CHECK(quant::mxfp4_scale_code(0.0f) == 0);
  QuantArgs mx{4, NumberType::floating, true, Strategy::group, 32, false};
  CHECK(mx.has_power_of_two_scales());
  std::vector<float> w(64, 0.0f);
  w[3] = 1.0f;
  w[40] = -0.3f;
  const auto grid = quant::compute_grid(w, 1, 64, mx, model::DType::bf16);
  CHECK(grid.scale_codes == std::vector<std::uint8_t>{125, 123});
  CHECK(grid.scale == std::vector<float>{0.25f, 0.0625f});
  CHECK(quant::quantize_value(1.0f, grid.scale[0], 0.0f, mx) == 4.0f);
}

TEST_CASE("NVFP4 grids: a global scale 448·6/max|W| (or the fused set's), FP8 group scales under it") {
  std::vector<float> w(32, 0.01f);
  w[0] = 3.0f;   // group 0's max
  w[20] = -0.5f; // group 1's max
  const auto args = nvfp4_weights();
  const auto own = quant::compute_grid(w, 1, 32, args, model::DType::f32);
  CHECK(own.global_scale == 448.0f * 6.0f / 3.0f);
  // Group 0's scale code is FP8(g · 3/6) = FP8(448): the largest FP8 value, and the max maps to 6.
  CHECK(own.scale_codes[0] == 0x7e);
  CHECK(own.scale[0] == 448.0f / own.global_scale);
  CHECK(quant::quantize_value(3.0f, own.scale[0], 0.0f, args) == 6.0f);
  CHECK(own.scale_codes[1] == quant::float_to_f8_e4m3(own.global_scale * 0.5f / 6.0f));
  // Shared with a fused linear whose max is 6: the global scale halves.
  const auto shared = quant::compute_grid(w, 1, 32, args, model::DType::f32, 6.0f);
  CHECK(shared.global_scale == 448.0f);
  // An all-zero group's FP8 scale becomes 0.125, never 0.
  const std::vector<float> zeros(16, 0.0f);
  CHECK(model::f8_e4m3_to_float(quant::compute_grid(zeros, 1, 16, args, model::DType::f32, 1.0f).scale_codes[0]) ==
        0.125f);
}

TEST_CASE("FP8 block grids: one scale per tile, shared by the tile's rows; partial tiles at the edges") {
  QuantArgs block{8, NumberType::floating, true, Strategy::block, 0, false};
  block.block_rows = 2;
  block.block_cols = 2;
  // [3, 3]: tiles rows {0,1} {2} x cols {0,1} {2}.
  const std::vector<float> w = {1, -2, 3, 4, 0.5f, -6, 7, 8, 9};
  const auto grid = quant::compute_grid(w, 3, 3, block, model::DType::f32);
  REQUIRE(grid.groups() == 2);
  const std::vector<float> want = {4 / 448.0f, 6 / 448.0f, 4 / 448.0f, 6 / 448.0f, 8 / 448.0f, 9 / 448.0f};
  CHECK(grid.scale == want);
}

TEST_CASE("dynamic group and NVFP4 activation quantization work per row and group") {
  QuantArgs fp8_group{8, NumberType::floating, true, Strategy::group, 2, true};
  std::vector<float> x = {1.0f, 0.3f, 100.0f, 1.0f};
  quant::fake_quantize_activations(x.data(), 1, 4, fp8_group);
  // Group 0's scale 1/448 keeps 1 exact; group 1's 100/448 rounds 1.0 to its FP8 neighbour.
  CHECK(x[0] == 1.0f);
  CHECK(x[2] == 100.0f);
  CHECK(x[3] == doctest::Approx(100.0 / 448.0 * double(model::f8_e4m3_to_float(quant::float_to_f8_e4m3(4.48f)))));
  QuantArgs nvfp4{4, NumberType::floating, true, Strategy::tensor_group, 16, true};
  nvfp4.dynamic_local = true;
  std::vector<float> a(16, 0.0f);
  a[0] = 6.0f;
  a[1] = 2.9f;
  quant::fake_quantize_activations(a.data(), 1, 16, nvfp4, 448.0f); // g·6/6 = 448: scale 1
  CHECK(a[0] == 6.0f);
  CHECK(a[1] == 3.0f);
}

TEST_CASE("the float schemes' arguments validate as compressed-tensors' presets and refuse the rest") {
  auto nv = nvfp4_weights();
  CHECK_NOTHROW(quant::validate(nv, false, "w"));
  nv.group_size = 32;
  CHECK_THROWS_AS(quant::validate(nv, false, "w"), InputError);
  QuantArgs fp4_channel{4, NumberType::floating, true, Strategy::channel, 0, false};
  CHECK_THROWS_AS(quant::validate(fp4_channel, false, "w"), InputError);
  QuantArgs block{8, NumberType::floating, true, Strategy::block, 0, false};
  CHECK_THROWS_AS(quant::validate(block, false, "w"), InputError); // no block_structure
  block.block_rows = block.block_cols = 128;
  CHECK_NOTHROW(quant::validate(block, false, "w"));
  const auto json = quant::to_json(block);
  CHECK(json.at("block_structure") == nlohmann::json::array({128, 128}));
  const auto back = quant::quant_args_from_json(json, "w");
  CHECK(back.block_rows == 128);
  CHECK(back.strategy == Strategy::block);
  QuantArgs local{4, NumberType::floating, true, Strategy::tensor_group, 16, true};
  local.dynamic_local = true;
  CHECK_NOTHROW(quant::validate(local, true, "a"));
  CHECK(quant::to_json(local).at("dynamic") == "local");
  CHECK(quant::quant_args_from_json(quant::to_json(local), "a").dynamic_local);
  local.dynamic_local = false;
  CHECK_THROWS_AS(quant::validate(local, true, "a"), InputError);
  CHECK_THROWS_AS(quant::quant_args_from_json({{"dynamic", "global"}}, "a"), InputError);
}

TEST_CASE("AWQ candidates: s = 1 first, then duo scaling's ratios, each normalised to √(max·min) = 1") {
  const std::vector<float> x_mean = {0.1f, 1.0f, 10.0f, 0.5f};
  const std::vector<float> w = {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f, 0.7f, -0.8f};
  const std::vector<std::span<const float>> weights = {w};
  const auto candidates = quant::awq_candidates(x_mean, weights, 4, 4, {});
  REQUIRE(candidates.size() == 20);
  CHECK(!candidates[0].duo);
  CHECK(candidates[0].scales == std::vector<float>(4, 1.0f));
  CHECK(candidates[1].duo);
  CHECK(candidates[19].ratio == 1.0);
  for (const auto& c : candidates) {
    const auto [lo, hi] = std::minmax_element(c.scales.begin(), c.scales.end());
    CHECK(double(*lo) * double(*hi) == doctest::Approx(1.0));
  }
  // At r = 1 the factors follow the activations: the largest mean |x| gets the largest factor.
  CHECK(std::max_element(candidates[19].scales.begin(), candidates[19].scales.end()) - candidates[19].scales.begin() ==
        2);
  CHECK(quant::awq_candidates(x_mean, weights, 4, 4, {20, false}).size() == 20);
  // The search keeps the least error and reports s = 1's.
  const auto search =
      quant::search_awq(candidates, [](const quant::AwqCandidate& c) { return c.ratio == 0.5 ? 1.0 : 2.0; });
  CHECK(search.best.ratio == 0.5);
  CHECK(search.identity_error == 2.0);
  // Q(W·s)/s with s = 1 is plain round to nearest.
  QuantArgs int4{4, NumberType::integer, false, Strategy::group, 4, false};
  const std::vector<float> ones(4, 1.0f);
  CHECK(quant::awq_fake_quantized(w, 2, 4, ones, int4, model::DType::f32) ==
        quant::rtn(w, 2, 4, int4, model::DType::f32).weight);
}

TEST_CASE("AWQ's clip search lowers the linear's output error, scored on the whole row, and clamps") {
  // 3 rows, 8 columns in groups of 4; one outlier per row stretches its group's grid. H = XᵀX of
  // correlated inputs, so the groups' errors interact through H's off-diagonal blocks.
  const std::int64_t rows = 3, cols = 8;
  const auto at = [](const std::vector<float>& v, std::int64_t i) { return double(v[static_cast<std::size_t>(i)]); };
  std::vector<float> w = {0.10f,  -0.20f, 0.15f,  2.50f, 0.05f,  -0.12f, 0.30f, 0.22f, //
                          -0.30f, 0.25f,  -0.05f, 0.11f, 0.40f,  -3.00f, 0.12f, 0.08f, //
                          0.20f,  0.21f,  -0.19f, 0.18f, -0.17f, 0.16f,  0.15f, -0.14f};
  std::vector<float> h(cols * cols);
  for (std::int64_t i = 0; i < cols; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      h[static_cast<std::size_t>(i * cols + j)] = i == j ? 2.0f : 0.6f / static_cast<float>(1 + std::abs(i - j));
  const QuantArgs int4{4, NumberType::integer, false, Strategy::group, 4, false};
  // The oracle: Σ_rows dᵀHd in double, d = RTN(W') − W for the original W.
  const auto output_error = [&](const std::vector<float>& clipped) {
    const auto q = quant::rtn(clipped, rows, cols, int4, model::DType::f32).weight;
    double e = 0;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i < cols; ++i)
        for (std::int64_t j = 0; j < cols; ++j)
          e += (at(q, r * cols + i) - at(w, r * cols + i)) * at(h, i * cols + j) *
               (at(q, r * cols + j) - at(w, r * cols + j));
    return e;
  };
  std::vector<float> clipped = w;
  const auto result = quant::awq_clip(clipped, rows, cols, h, int4, model::DType::f32);
  CHECK(result.error_before == doctest::Approx(output_error(w)).epsilon(1e-4));
  CHECK(result.error_after == doctest::Approx(output_error(clipped)).epsilon(1e-4));
  CHECK(result.error_after < result.error_before);
  // Values only ever move toward zero, each group within its own range, and a bound below 1 was
  // chosen somewhere (the outliers' groups).
  bool moved = false;
  for (std::size_t i = 0; i < w.size(); ++i) {
    CHECK(std::fabs(clipped[i]) <= std::fabs(w[i]));
    CHECK(clipped[i] * w[i] >= 0);
    moved = moved || clipped[i] != w[i];
  }
  CHECK(moved);
  // A grid of one bound (no shrink) leaves W as it was.
  std::vector<float> unclipped = w;
  quant::awq_clip(unclipped, rows, cols, h, int4, model::DType::f32, {20, 0.0});
  CHECK(unclipped == w);
  CHECK_THROWS_AS(quant::awq_clip(unclipped, rows, cols, std::vector<float>(4), int4, model::DType::f32), InputError);
}

TEST_CASE("kv_cache_scheme: written and read back per tensor or per head; other KV schemes are refused") {
  quant::QuantizationConfig config;
  config.format = "float-quantized";
  config.groups.push_back({{"Linear"}, QuantArgs{8, NumberType::floating, true, Strategy::channel, 0, false}, {}});
  config.kv_cache = quant::KvScaleStrategy::attn_head;
  const nlohmann::json json = {{"quantization_config", quant::to_json(config)}};
  CHECK(json["quantization_config"]["kv_cache_scheme"]["strategy"] == "attn_head");
  const auto back = quant::read_quantization_config(json, "config.json");
  REQUIRE(back);
  CHECK(back->kv_cache == quant::KvScaleStrategy::attn_head);
  CHECK(quant::describe(*back).find("FP8 KV cache, scales per attn_head") != std::string::npos);
  auto int8_cache = json;
  int8_cache["quantization_config"]["kv_cache_scheme"]["type"] = "int";
  CHECK_THROWS_AS(quant::read_quantization_config(int8_cache, "config.json"), InputError);
  auto dynamic = json;
  dynamic["quantization_config"]["kv_cache_scheme"]["dynamic"] = true;
  CHECK_THROWS_AS(quant::read_quantization_config(dynamic, "config.json"), InputError);
  CHECK(quant::kv_scale_names(3)[1] == "model.layers.3.self_attn.v_scale");
}
