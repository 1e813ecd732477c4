// The panel GEMMs against a float64 reference on awkward shapes (K not a multiple of 32, activation
// and weight rows not multiples of the register tile or the 32-row panel, K spanning several packed
// blocks of either kernel, a row pitch of whole 4 KiB pages; with and without whole 32-row panels,
// 16-row AMX tiles and 32-row transposed blocks), on the CPU's fastest kernel and on the AVX-512
// one: BF16 `split` and F32 within fp32 accuracy, BF16 `rounded` the product of BF16-rounded
// activations. On a CPU without the instructions (or OPTKIT_CPU_BASELINE=1, or a portable build)
// the kernels are not offered, which is checked instead. W packed into panels at load
// (avx512_packed) is checked the same way, its rows read back exactly, and a row's result the
// same bits whether it runs alone or beside others.
#include "model/dtype.hpp"
#include "runtime/packed_panels.hpp"
#include "runtime/panel_gemm.hpp"

#include <algorithm>
#include <cmath>
#include <doctest/doctest.h>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

using namespace optkit;
using namespace optkit::runtime;

namespace {

struct Case {
  std::int64_t m, rows, cols;
};

// max over outputs of |got - want| / Σ_c |W[r,c]·x[i,c]| (the product's own scale).
double
worst_error(const std::vector<float>& got, const std::vector<Bf16>& w, const std::vector<float>& x, const Case& c,
            bool round_x) {
  double worst = 0;
  for (std::int64_t i = 0; i < c.m; ++i)
    for (std::int64_t r = 0; r < c.rows; ++r) {
      double want = 0, scale = 0;
      for (std::int64_t k = 0; k < c.cols; ++k) {
        float xv = x[static_cast<std::size_t>(i * c.cols + k)];
        if (round_x)
          xv = model::bf16_to_float(model::float_to_bf16(xv));
        const double p =
            static_cast<double>(to_float(w[static_cast<std::size_t>(r * c.cols + k)])) * static_cast<double>(xv);
        want += p;
        scale += std::fabs(p);
      }
      const double err = std::fabs(static_cast<double>(got[static_cast<std::size_t>(i * c.rows + r)]) - want);
      worst = std::max(worst, err / std::max(scale, 1e-30));
    }
  return worst;
}

// W packed into panels: its rows read back exactly; the product in two calls over whole panels
// against float64; each activation row alone gives the same bits as all of them together.
void
check_packed_panels(const std::vector<Bf16>& w, const std::vector<float>& x, const Case& c, PanelProduct product) {
  const bool rounded = product == PanelProduct::bf16_rounded;
  const PackedPanels panels(w.data(), c.rows, c.cols);
  std::vector<float> row(static_cast<std::size_t>(c.cols));
  int row_mismatches = 0;
  for (std::int64_t r = 0; r < c.rows; ++r) {
    panels.row(r, row.data());
    for (std::int64_t k = 0; k < c.cols; ++k)
      row_mismatches += row[static_cast<std::size_t>(k)] != to_float(w[static_cast<std::size_t>(r * c.cols + k)]);
  }
  CHECK(row_mismatches == 0);
  const auto packed = pack_activations(x.data(), c.m, c.cols, product, PanelKernel::avx512_packed);
  std::vector<float> y(static_cast<std::size_t>(c.m * c.rows), -1.0f);
  const std::int64_t half = c.rows / 2 / PackedPanels::kPanelRows * PackedPanels::kPanelRows;
  panel_gemm_rows(panels, 0, half, packed, y.data(), c.rows);
  panel_gemm_rows(panels, half, c.rows, packed, y.data(), c.rows);
  CHECK(worst_error(y, w, x, c, rounded) < (rounded ? 1e-6 : 2e-5));
  if (!rounded)
    CHECK(worst_error(y, w, x, c, true) > 1e-4);
  for (const std::int64_t i : {std::int64_t{0}, c.m - 1}) {
    const auto alone = pack_activations(x.data() + i * c.cols, 1, c.cols, product, PanelKernel::avx512_packed);
    std::vector<float> y_alone(static_cast<std::size_t>(c.rows));
    panel_gemm_rows(panels, 0, c.rows, alone, y_alone.data(), c.rows);
    CHECK(std::equal(y_alone.begin(), y_alone.end(), y.begin() + i * c.rows));
  }
  // fp32 activations against the packed BF16 panels (decode in the fp32 mode): an fp32 product.
  const auto exact = pack_activations(x.data(), c.m, c.cols, PanelProduct::f32, PanelKernel::avx512_packed);
  std::vector<float> y_exact(y.size(), -1.0f);
  panel_gemm_rows(panels, 0, half, exact, y_exact.data(), c.rows);
  panel_gemm_rows(panels, half, c.rows, exact, y_exact.data(), c.rows);
  CHECK(worst_error(y_exact, w, x, c, false) < 1e-6);
  // Activations packed for W in rows are refused, and so is a range that splits a panel.
  CHECK_THROWS_AS(panel_gemm_rows(panels, 0, c.rows,
                                  pack_activations(x.data(), 1, c.cols, product, PanelKernel::avx512), y.data(),
                                  c.rows),
                  std::logic_error);
  if (c.rows > 1)
    CHECK_THROWS_AS(panel_gemm_rows(panels, 1, c.rows, packed, y.data(), c.rows), std::logic_error);
}

} // namespace

TEST_CASE("the panel GEMMs match a float64 reference") {
  if (!panel_gemm_supported(PanelProduct::f32)) {
    MESSAGE("no AVX-512 panel kernels on this build or CPU: the runtime keeps OpenBLAS sgemm");
    CHECK_FALSE(panel_gemm_supported(PanelProduct::bf16_split));
    CHECK_THROWS_AS(pack_activations(nullptr, 0, 0, PanelProduct::f32), std::logic_error);
    return;
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const Case c :
       {Case{1, 5, 32}, Case{4, 6, 64}, Case{7, 13, 37}, Case{12, 50, 100}, Case{9, 7, 1}, Case{33, 19, 256},
        Case{5, 11, 95}, Case{13, 70, 600}, Case{45, 70, 600}, Case{50, 96, 300}, Case{32, 64, 512}, Case{17, 33, 64},
        Case{40, 64, 2100}, Case{20, 32, 1024}, Case{18, 32, 2048}, Case{56, 19, 700}, Case{3, 200, 330}}) {
    CAPTURE(c.m);
    CAPTURE(c.rows);
    CAPTURE(c.cols);
    std::vector<Bf16> w(static_cast<std::size_t>(c.rows * c.cols));
    std::vector<float> w32(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      w[i].bits = model::float_to_bf16(normal(rng));
      w32[i] = to_float(w[i]);
    }
    std::vector<float> x(static_cast<std::size_t>(c.m * c.cols));
    for (auto& v : x)
      v = normal(rng) * 3.0f;
    for (const auto product : {PanelProduct::bf16_split, PanelProduct::bf16_rounded, PanelProduct::f32}) {
      if (!panel_gemm_supported(product))
        continue;
      const bool rounded = product == PanelProduct::bf16_rounded;
      CAPTURE(static_cast<int>(product));
      // The CPU's fastest kernel (AMX where it has it) and the AVX-512 one.
      for (const auto kernel : {*panel_gemm_kernel(product, c.m), PanelKernel::avx512}) {
        CAPTURE(static_cast<int>(kernel));
        const auto packed = pack_activations(x.data(), c.m, c.cols, product, kernel);
        std::vector<float> y(static_cast<std::size_t>(c.m * c.rows), -1.0f);
        // Two calls over a split of W's rows, as two threads would make them.
        const std::int64_t half = c.rows / 2;
        for (const auto& [r0, r1] : {std::pair{std::int64_t{0}, half}, std::pair{half, c.rows}}) {
          if (product == PanelProduct::f32)
            panel_gemm_rows(w32.data(), r0, r1, packed, y.data(), c.rows);
          else
            panel_gemm_rows(w.data(), r0, r1, packed, y.data(), c.rows);
        }
        // fp32 accumulation: a few ulps of the product's scale. Split activations keep ~16 bits.
        CHECK(worst_error(y, w, x, c, rounded) < (rounded ? 1e-6 : 2e-5));
        if (product == PanelProduct::bf16_split) // and rounding them would be visibly worse
          CHECK(worst_error(y, w, x, c, true) > 1e-4);
      }
      if (product != PanelProduct::f32)
        check_packed_panels(w, x, c, product);
    }
  }
  // A kernel that does not serve the product is refused.
  CHECK_THROWS_AS(pack_activations(nullptr, 0, 32, PanelProduct::bf16_split, PanelKernel::f32_transposed),
                  std::logic_error);
  CHECK_THROWS_AS(pack_activations(nullptr, 0, 32, PanelProduct::f32, PanelKernel::amx), std::logic_error);
  // F32 weights with a BF16 encoding (or the reverse) are a programming error, refused.
  const std::vector<float> x(32, 1.0f), w32(32, 1.0f);
  std::vector<float> y(1);
  CHECK_THROWS_AS(
      panel_gemm_rows(w32.data(), 0, 1, pack_activations(x.data(), 1, 32, PanelProduct::bf16_split), y.data(), 1),
      std::logic_error);
}
