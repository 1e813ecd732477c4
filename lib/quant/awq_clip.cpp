#include "quant/awq_clip.hpp"

#include "core/error.hpp"
#include "quant/quantizer.hpp"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace optkit::quant {

namespace {

// The group's diagonal block of H, [width, width].
std::vector<float>
hessian_block(std::span<const float> h, std::int64_t cols, std::int64_t first, std::int64_t width) {
  std::vector<float> block(static_cast<std::size_t>(width * width));
  for (std::int64_t i = 0; i < width; ++i)
    std::copy_n(h.data() + (first + i) * cols + first, width, block.data() + i * width);
  return block;
}

// Each row's group clamped to ±bound·max|w| and quantized on its own grid, minus the original:
// D [rows, width].
void
clipped_error(std::span<const float> w, std::int64_t rows, std::int64_t cols, std::int64_t first, std::int64_t width,
              double bound, const QuantArgs& args, model::DType scale_dtype, std::vector<float>& d) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = w.data() + r * cols + first;
    float absmax = 0;
    for (std::int64_t j = 0; j < width; ++j)
      absmax = std::max(absmax, std::fabs(row[j]));
    const auto limit = static_cast<float>(static_cast<double>(absmax) * bound);
    float lo = 0, hi = 0;
    for (std::int64_t j = 0; j < width; ++j) {
      lo = std::min(lo, std::clamp(row[j], -limit, limit));
      hi = std::max(hi, std::clamp(row[j], -limit, limit));
    }
    const ScaleZero grid = scale_for_range(lo, hi, args, scale_dtype);
    float* out = d.data() + r * width;
    for (std::int64_t j = 0; j < width; ++j)
      out[j] = fake_quantize(std::clamp(row[j], -limit, limit), grid.scale, grid.zero, args) - row[j];
  }
}

// Each row's output error change from its group's columns: cᵀ H_gg c + 2·cᵀ q, through one product
// C·H_gg, where q = (the row's error on the other groups)·H[:, group] (empty `cross`: q = 0, so
// with the whole H it is the row's output error dᵀ H d).
void
row_errors(std::span<const float> c, std::span<const float> block, std::span<const float> cross, std::int64_t rows,
           std::int64_t width, std::vector<float>& product, std::vector<double>& errors) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(width),
              static_cast<int>(width), 1.0f, c.data(), static_cast<int>(width), block.data(), static_cast<int>(width),
              0.0f, product.data(), static_cast<int>(width));
  for (std::int64_t r = 0; r < rows; ++r) {
    double e = 0;
    for (std::int64_t j = 0; j < width; ++j) {
      const auto i = static_cast<std::size_t>(r * width + j);
      const double q = cross.empty() ? 0.0 : static_cast<double>(cross[i]);
      e += static_cast<double>(c[i]) * (static_cast<double>(product[i]) + 2.0 * q);
    }
    errors[static_cast<std::size_t>(r)] = e;
  }
}

// Σ_rows dᵀ H d over whole rows: the linear's output error for quantization error D [rows, cols].
double
output_error(const std::vector<float>& d, std::span<const float> h, std::int64_t rows, std::int64_t cols) {
  std::vector<float> product(d.size());
  std::vector<double> errors(static_cast<std::size_t>(rows));
  row_errors(d, h, {}, rows, cols, product, errors);
  return std::accumulate(errors.begin(), errors.end(), 0.0);
}

// (D with the group's columns zeroed)·H[:, group]: [rows, width].
std::vector<float>
cross_terms(const std::vector<float>& d, std::span<const float> h, std::int64_t rows, std::int64_t cols,
            std::int64_t first, std::int64_t width) {
  std::vector<float> others(d);
  for (std::int64_t r = 0; r < rows; ++r)
    std::fill_n(others.data() + r * cols + first, width, 0.0f);
  std::vector<float> cross(static_cast<std::size_t>(rows * width));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(width),
              static_cast<int>(cols), 1.0f, others.data(), static_cast<int>(cols), h.data() + first,
              static_cast<int>(cols), 0.0f, cross.data(), static_cast<int>(width));
  return cross;
}

// The group clamped to ±bound·max|w| in place.
void
clamp_group(std::span<float> group, double bound) {
  float absmax = 0;
  for (const float v : group)
    absmax = std::max(absmax, std::fabs(v));
  const auto limit = static_cast<float>(static_cast<double>(absmax) * bound);
  for (float& v : group)
    v = std::clamp(v, -limit, limit);
}

} // namespace

ClipResult
awq_clip(std::span<float> w, std::int64_t rows, std::int64_t cols, std::span<const float> hessian,
         const QuantArgs& args, model::DType scale_dtype, const AwqClipOptions& options) {
  if (static_cast<std::int64_t>(w.size()) != rows * cols || static_cast<std::int64_t>(hessian.size()) != cols * cols)
    throw InputError("awq_clip: the weight or Hessian does not match its shape");
  const std::int64_t group = args.strategy == Strategy::group ? args.group_size : cols;
  const int steps = std::max(1, static_cast<int>(options.grid * options.max_shrink));
  // D: every group's quantization error as it stands, unclipped to begin with.
  std::vector<float> d(w.size());
  for (std::int64_t first = 0; first < cols; first += group) {
    const std::int64_t width = std::min(group, cols - first);
    std::vector<float> c(static_cast<std::size_t>(rows * width));
    clipped_error(w, rows, cols, first, width, 1.0, args, scale_dtype, c);
    for (std::int64_t r = 0; r < rows; ++r)
      std::copy_n(c.data() + r * width, width, d.data() + r * cols + first);
  }
  ClipResult result;
  result.error_before = output_error(d, hessian, rows, cols);
  for (std::int64_t first = 0; first < cols; first += group) {
    const std::int64_t width = std::min(group, cols - first);
    const auto block = hessian_block(hessian, cols, first, width);
    const auto cross = cross_terms(d, hessian, rows, cols, first, width);
    std::vector<float> c(static_cast<std::size_t>(rows * width)), product(c.size()), best_c(c.size());
    std::vector<double> errors(static_cast<std::size_t>(rows));
    std::vector<double> best(static_cast<std::size_t>(rows), std::numeric_limits<double>::infinity());
    std::vector<double> best_bound(static_cast<std::size_t>(rows), 1.0);
    for (int k = 0; k < steps; ++k) {
      const double bound = 1.0 - static_cast<double>(k) / options.grid;
      clipped_error(w, rows, cols, first, width, bound, args, scale_dtype, c);
      row_errors(c, block, cross, rows, width, product, errors);
      for (std::int64_t r = 0; r < rows; ++r)
        if (const auto i = static_cast<std::size_t>(r); errors[i] < best[i]) {
          best[i] = errors[i];
          best_bound[i] = bound;
          std::copy_n(c.data() + r * width, width, best_c.data() + r * width);
        }
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      clamp_group(w.subspan(static_cast<std::size_t>(r * cols + first), static_cast<std::size_t>(width)),
                  best_bound[static_cast<std::size_t>(r)]);
      std::copy_n(best_c.data() + r * width, width, d.data() + r * cols + first);
    }
  }
  result.error_after = output_error(d, hessian, rows, cols);
  return result;
}

} // namespace optkit::quant
