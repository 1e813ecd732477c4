#include "quant/quantizer.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace optkit::quant {

float
round_to_dtype(float value, model::DType dtype) {
  switch (dtype) {
  case model::DType::bf16:
    return model::bf16_to_float(model::float_to_bf16(value));
  case model::DType::f16:
    return model::f16_to_float(model::float_to_f16(value));
  default:
    return value;
  }
}

ScaleZero
scale_for_range(float lo, float hi, const QuantArgs& args, model::DType scale_dtype) {
  lo = std::min(lo, 0.0f);
  hi = std::max(hi, 0.0f);
  const float qmin = args.qmin(), qmax = args.qmax();
  const float eps = std::numeric_limits<float>::epsilon();
  ScaleZero out;
  if (args.symmetric) {
    const float absmax = std::max(std::fabs(lo), std::fabs(hi));
    out.scale = round_to_dtype(std::max(absmax / ((qmax - qmin) / 2.0f), eps), scale_dtype);
    out.scale = std::max(out.scale, eps);
    if (args.levels == Levels::midrise)
      out.zero = -0.5f; // (q + ½)·s: the outermost levels are ±absmax
  } else {
    out.scale = round_to_dtype(std::max((hi - lo) / (qmax - qmin), eps), scale_dtype);
    out.scale = std::max(out.scale, eps);
    out.zero = std::clamp(std::nearbyint(qmin - lo / out.scale), qmin, qmax);
  }
  return out;
}

QuantGrid
compute_grid(std::span<const float> w, std::int64_t rows, std::int64_t cols, const QuantArgs& args,
             model::DType scale_dtype) {
  if (static_cast<std::int64_t>(w.size()) != rows * cols)
    throw InputError("compute_grid: weight size does not match its shape");
  QuantGrid grid;
  grid.args = args;
  grid.rows = rows;
  grid.cols = cols;
  grid.group_size = args.strategy == Strategy::group ? std::min(args.group_size, cols) : cols;
  const auto groups = grid.groups();
  grid.scale.resize(static_cast<std::size_t>(rows * groups));
  grid.zero.assign(grid.scale.size(), 0.0f);
  if (args.strategy == Strategy::tensor) {
    const auto [lo, hi] = std::minmax_element(w.begin(), w.end());
    const auto sz = scale_for_range(*lo, *hi, args, scale_dtype);
    std::fill(grid.scale.begin(), grid.scale.end(), sz.scale);
    std::fill(grid.zero.begin(), grid.zero.end(), sz.zero);
    return grid;
  }
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < groups; ++g) {
      const auto begin = w.begin() + r * cols + g * grid.group_size;
      const auto end = w.begin() + r * cols + std::min(cols, (g + 1) * grid.group_size);
      const auto [lo, hi] = std::minmax_element(begin, end);
      const auto sz = scale_for_range(*lo, *hi, args, scale_dtype);
      grid.scale[static_cast<std::size_t>(r * groups + g)] = sz.scale;
      grid.zero[static_cast<std::size_t>(r * groups + g)] = sz.zero;
    }
  return grid;
}

std::uint8_t
float_to_f8_e4m3(float value) {
  if (std::isnan(value))
    return 0x7f;
  const std::uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  const float a = std::fabs(value);
  // Smallest normal 2^-6; subnormals are multiples of 2^-9.
  if (a < std::ldexp(1.0f, -6)) {
    const float m = std::nearbyint(a * 512.0f); // 0..8; 8 rounds up to the smallest normal
    return static_cast<std::uint8_t>(sign | static_cast<std::uint8_t>(m));
  }
  int exponent = 0;
  const float frac = std::frexp(a, &exponent); // a = frac * 2^exponent, frac in [0.5, 1)
  float mantissa = std::nearbyint((frac * 2.0f - 1.0f) * 8.0f);
  int e = exponent - 1 + 7;
  if (mantissa >= 8.0f) {
    mantissa = 0.0f;
    ++e;
  }
  if (e > 15 || (e == 15 && mantissa > 6.0f))
    return static_cast<std::uint8_t>(sign | 0x7e); // saturate at 448 (inputs are clamped first)
  return static_cast<std::uint8_t>(sign | (e << 3) | static_cast<int>(mantissa));
}

float
quantize_value(float x, float scale, float zero, const QuantArgs& args) {
  const float scaled = std::clamp(x / scale + zero, args.qmin(), args.qmax());
  if (args.is_fp8())
    return model::f8_e4m3_to_float(float_to_f8_e4m3(scaled));
  return std::nearbyint(scaled);
}

void
fake_quantize_activations(float* x, std::int64_t rows, std::int64_t cols, const QuantArgs& args) {
  const float top = args.is_fp8() ? 448.0f : args.qmax();
  auto quantize_span = [&](float* v, std::int64_t n, float absmax) {
    if (absmax <= 0.0f)
      return;
    const float scale = absmax / top;
    for (std::int64_t i = 0; i < n; ++i)
      v[i] = quantize_value(v[i], scale, 0.0f, args) * scale;
  };
  auto absmax_of = [](const float* v, std::int64_t n) {
    float m = 0.0f;
    for (std::int64_t i = 0; i < n; ++i)
      m = std::max(m, std::fabs(v[i]));
    return m;
  };
  if (args.strategy == Strategy::token) {
    for (std::int64_t r = 0; r < rows; ++r)
      quantize_span(x + r * cols, cols, absmax_of(x + r * cols, cols));
  } else {
    quantize_span(x, rows * cols, absmax_of(x, rows * cols));
  }
}

} // namespace optkit::quant
