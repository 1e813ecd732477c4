// A BF16 dense weight in each activation mode, on every path its multiply takes (the row-dots of
// decode, the panel GEMM of prefill where the CPU has it, the widened OpenBLAS product otherwise),
// against float64 products: fp32 mode is the exact product to fp32 rounding; bf16 mode is the
// exact product of the activations rounded to BF16 (nearest, ties to even), on every path.
#include "core/thread_pool.hpp"
#include "runtime/linear_weight.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <span>
#include <vector>

using namespace optkit;
using namespace optkit::runtime;

namespace {

// max |y - x·Wᵀ| / max |x·Wᵀ| with x optionally rounded to BF16 first, in float64.
double
error_against_float64(const std::vector<float>& y, const std::vector<std::uint16_t>& w, const std::vector<float>& x,
                      std::int64_t m, std::int64_t rows, std::int64_t cols, bool round_x) {
  double worst = 0, scale = 0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t r = 0; r < rows; ++r) {
      double want = 0;
      for (std::int64_t c = 0; c < cols; ++c) {
        float xv = x[static_cast<std::size_t>(i * cols + c)];
        if (round_x)
          xv = model::bf16_to_float(model::float_to_bf16(xv));
        want += static_cast<double>(model::bf16_to_float(w[static_cast<std::size_t>(r * cols + c)])) *
                static_cast<double>(xv);
      }
      scale = std::max(scale, std::fabs(want));
      worst = std::max(worst, std::fabs(want - static_cast<double>(y[static_cast<std::size_t>(i * rows + r)])));
    }
  return worst / scale;
}

} // namespace

TEST_CASE("a BF16 weight multiplies exact activations in fp32 mode and BF16-rounded ones in bf16 mode, on every path") {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t rows = 70, cols = 300;
  std::vector<std::uint16_t> w(static_cast<std::size_t>(rows * cols));
  for (auto& v : w)
    v = model::float_to_bf16(normal(rng));
  ThreadPool pool(2);
  // 1 and 3 rows: the row-dots; 5, 20 and 40: the panel GEMM (or OpenBLAS where the CPU lacks it).
  for (const std::int64_t m : {1, 3, 5, 20, 40}) {
    CAPTURE(m);
    std::vector<float> x(static_cast<std::size_t>(m * cols));
    for (auto& v : x)
      v = normal(rng) * 3.0f;
    for (const auto activations : {ActivationPrecision::fp32, ActivationPrecision::bf16}) {
      CAPTURE(activation_precision_name(activations));
      const auto weight = make_dense_weight(model::DType::bf16, std::as_bytes(std::span(w)), rows, cols, activations);
      std::vector<float> y(static_cast<std::size_t>(m * rows));
      weight->multiply(x.data(), m, y.data(), pool);
      const bool rounded = activations == ActivationPrecision::bf16;
      // fp32 accumulation: a few ulps of the product's scale (the split encoding keeps ~16 bits).
      CHECK(error_against_float64(y, w, x, m, rows, cols, rounded) < 2e-5);
      CHECK(error_against_float64(y, w, x, m, rows, cols, !rounded) > 1e-4); // the other mode is visibly different
    }
  }
}

TEST_CASE("the activation mode is fp32 or bf16, and anything else names the flag") {
  CHECK(parse_activation_precision("bf16") == ActivationPrecision::bf16);
  CHECK(parse_activation_precision("fp32") == ActivationPrecision::fp32);
  CHECK(activation_precision_name(parse_activation_precision("bf16")) == "bf16");
  try {
    parse_activation_precision("fp16", "--activations");
    FAIL("fp16 was accepted");
  } catch (const std::exception& e) {
    CHECK(std::string(e.what()).find("--activations 'fp16'") != std::string::npos);
  }
}
