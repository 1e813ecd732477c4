// The row-dot kernels of decode (dot_rows: AVX-512 for one activation row, AVX2 for a few, the
// portable loops elsewhere) against a float64 reference, for every storage type and on shapes
// that leave tails everywhere: cols not a multiple of the 32-wide step, W rows not a multiple of
// the 8-row group, activation rows 1 to 5, and a sub-range of W's rows as a thread takes it.
#include "model/dtype.hpp"
#include "runtime/dot_rows.hpp"

#include <cmath>
#include <doctest/doctest.h>
#include <random>
#include <vector>

using namespace optkit;
using namespace optkit::runtime;

namespace {

Bf16
encode(float v, Bf16) {
  return Bf16{model::float_to_bf16(v)};
}
F16
encode(float v, F16) {
  return F16{model::float_to_f16(v)};
}
float
encode(float v, float) {
  return v;
}

template <typename T>
void
check_type(const char* name) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const std::int64_t rows : {1, 7, 8, 19, 40})
    for (const std::int64_t cols : {1, 15, 16, 31, 32, 33, 100, 257})
      for (const std::int64_t m : {1, 2, 5}) {
        CAPTURE(name);
        CAPTURE(rows);
        CAPTURE(cols);
        CAPTURE(m);
        std::vector<T> w(static_cast<std::size_t>(rows * cols));
        for (auto& v : w)
          v = encode(normal(rng), T{});
        std::vector<float> x(static_cast<std::size_t>(m * cols));
        for (auto& v : x)
          v = normal(rng);
        const std::int64_t r0 = rows > 2 ? 1 : 0, ldy = rows + 3;
        std::vector<float> y(static_cast<std::size_t>(m * ldy), 12345.0f);
        dot_rows(w.data(), cols, r0, rows, x.data(), m, y.data(), ldy);
        double worst = 0;
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t r = 0; r < rows + 3; ++r) {
            const float got = y[static_cast<std::size_t>(i * ldy + r)];
            if (r < r0 || r >= rows) { // outside the range: untouched
              CHECK(got == 12345.0f);
              continue;
            }
            double want = 0, scale = 0;
            for (std::int64_t c = 0; c < cols; ++c) {
              const double p = static_cast<double>(to_float(w[static_cast<std::size_t>(r * cols + c)])) *
                               static_cast<double>(x[static_cast<std::size_t>(i * cols + c)]);
              want += p;
              scale += std::fabs(p);
            }
            worst = std::max(worst, std::fabs(static_cast<double>(got) - want) / std::max(scale, 1e-30));
          }
        CHECK(worst < 1e-6);
      }
}

} // namespace

TEST_CASE("the row-dot kernels match a float64 reference for every storage type and tail") {
  MESSAGE("row-dot kernel: " << dot_rows_kernel());
  check_type<float>("f32");
  check_type<Bf16>("bf16");
  check_type<F16>("f16");
}
