// W8A8 weights (int8 per-row scales, int8 symmetric activations per token or per tensor) multiply
// as the scheme defines: each activation row fake-quantized on quant's grid, times the dequantized
// weights, summed in float64 here. The runtime's answer — integer VPDPBUSD sums where the CPU has
// AVX512_VNNI, the float path elsewhere (and under OPTKIT_CPU_BASELINE=1) — must agree to fp32
// rounding on shapes with every tail (K around the 64-byte step, W rows around the 4- and 8-row
// tiles, activation rows around the 4-row tile), an all-zero activation row included; and the
// kernel's activation grid must be quant's, value for value.
#include "core/thread_pool.hpp"
#include "quant/quant_args.hpp"
#include "quant/quantizer.hpp"
#include "runtime/delta_int8.hpp"
#include "runtime/int8_gemm.hpp"
#include "runtime/quantized_weight.hpp"

#include <cmath>
#include <cstring>
#include <doctest/doctest.h>
#include <random>
#include <vector>

using namespace optkit;
using namespace optkit::runtime;

namespace {

quant::QuantArgs
activations(quant::Strategy strategy) {
  return quant::QuantArgs{8, quant::NumberType::integer, true, strategy, 0, true};
}

} // namespace

TEST_CASE("W8A8 products equal the fake-quantized float64 product for every tail") {
  MESSAGE("integer W8A8 kernel (AVX512_VNNI): " << (int8_gemm_supported() ? "yes" : "no, the float path"));
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> q(-128, 127);
  ThreadPool pool(2);
  for (const auto strategy : {quant::Strategy::token, quant::Strategy::tensor})
    for (const std::int64_t cols : {1, 63, 64, 65, 200, 1000})
      for (const std::int64_t rows : {1, 3, 4, 9, 17, 40})
        for (const std::int64_t m : {1, 2, 5, 8}) {
          CAPTURE(static_cast<int>(strategy));
          CAPTURE(cols);
          CAPTURE(rows);
          CAPTURE(m);
          std::vector<std::int8_t> w(static_cast<std::size_t>(rows * cols));
          for (auto& v : w)
            v = static_cast<std::int8_t>(q(rng));
          std::vector<float> scales(static_cast<std::size_t>(rows));
          for (auto& s : scales)
            s = 0.01f + std::fabs(normal(rng)) * 0.02f;
          std::vector<float> x(static_cast<std::size_t>(m * cols));
          for (auto& v : x)
            v = normal(rng) * 4.0f;
          if (m > 2) // an all-zero activation row
            std::fill_n(x.begin() + cols, cols, 0.0f);
          const auto args = activations(strategy);
          const auto weight = make_quantized_weight(
              {QuantizedStorage::int8_values, rows, cols, 8, std::as_bytes(std::span(w)), scales, cols, args});
          std::vector<float> y(static_cast<std::size_t>(m * rows));
          weight->multiply(x.data(), m, y.data(), pool);

          std::vector<float> fake = x;
          quant::fake_quantize_activations(fake.data(), m, cols, args);
          double worst = 0;
          for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t r = 0; r < rows; ++r) {
              double want = 0, scale = 0;
              for (std::int64_t c = 0; c < cols; ++c) {
                const double p = static_cast<double>(fake[static_cast<std::size_t>(i * cols + c)]) *
                                 static_cast<double>(w[static_cast<std::size_t>(r * cols + c)]) *
                                 static_cast<double>(scales[static_cast<std::size_t>(r)]);
                want += p;
                scale += std::fabs(p);
              }
              const double got = static_cast<double>(y[static_cast<std::size_t>(i * rows + r)]);
              worst = std::max(worst, std::fabs(got - want) / std::max(scale, 1e-30));
            }
          CHECK(worst < 1e-6);
        }
}

TEST_CASE("the integer kernels quantize activations on quant's grid, value for value") {
  // AVX-512 where the W8A8 kernel runs, scalar where only the AVX2 Δ kernel does.
  if (!int8_gemm_supported() && !delta_int8_cpu()) {
    MESSAGE("no integer kernel on this build or CPU: the float paths serve W8A8 and the Δs");
    return;
  }
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t m = 3, cols = 77;
  std::vector<float> x(static_cast<std::size_t>(m * cols));
  for (auto& v : x)
    v = normal(rng) * 3.0f;
  // Row 0's step is exactly 1 (max |x| = 127), so 2.5 and -3.5 are ties: half to even gives 2, -4.
  x[0] = 127.0f;
  x[5] = 2.5f;
  x[6] = -3.5f;
  for (const bool per_tensor : {false, true}) {
    const auto packed = quantize_activations_u8(x.data(), m, cols, per_tensor);
    CHECK(packed.pitch % 64 == 0);
    const auto args = activations(per_tensor ? quant::Strategy::tensor : quant::Strategy::token);
    std::vector<float> fake = x;
    quant::fake_quantize_activations(fake.data(), m, cols, args);
    for (std::int64_t i = 0; i < m; ++i) {
      const float s = packed.scale[static_cast<std::size_t>(i)];
      REQUIRE(s > 0.0f);
      for (std::int64_t c = 0; c < packed.pitch; ++c) {
        const int got = static_cast<int>(packed.u[static_cast<std::size_t>(i * packed.pitch + c)]) - 128;
        if (c >= cols) {
          CHECK(got == 0); // padding is a zero activation
          continue;
        }
        CHECK(static_cast<float>(got) * s == fake[static_cast<std::size_t>(i * cols + c)]);
      }
    }
    CHECK(static_cast<int>(packed.u[5]) - 128 == 2);
    CHECK(static_cast<int>(packed.u[6]) - 128 == -4);
  }
}
