#include "quant/quantizer.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

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

namespace {

// The E2M1 magnitudes by code (bits 0-2).
constexpr std::array<float, 8> kFp4Magnitudes = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
// An FP8 E4M3 group scale that rounds to 0 becomes this (compressed-tensors' FP8 epsilon).
constexpr std::uint8_t kFp8ScaleFloorCode = 0x20; // 0.125

std::pair<float, float>
minmax_of(std::span<const float> values) {
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return {*lo, *hi};
}

float
absmax_of(float lo, float hi) {
  return std::max(std::fabs(std::min(lo, 0.0f)), std::fabs(std::max(hi, 0.0f)));
}

// One group's scale on a 4-bit float grid: NVFP4 (an FP8 code under the global scale) or MXFP4
// (an E8M0 exponent); the effective scale and the code.
std::pair<float, std::uint8_t>
fp4_group_scale(float absmax, const QuantArgs& args, float global_scale, model::DType scale_dtype) {
  if (args.has_power_of_two_scales()) {
    const auto code = mxfp4_scale_code(absmax);
    return {e8m0_to_float(code), code};
  }
  const auto code = nvfp4_scale_code(round_to_dtype(absmax / args.qmax(), scale_dtype), global_scale);
  return {model::f8_e4m3_to_float(code) / global_scale, code};
}

// Block strategy: each [block_rows, block_cols] tile's symmetric scale, repeated over its rows.
void
fill_block_scales(QuantGrid& grid, std::span<const float> w, model::DType scale_dtype) {
  const auto& args = grid.args;
  const auto groups = grid.groups();
  for (std::int64_t r0 = 0; r0 < grid.rows; r0 += args.block_rows) {
    const auto r1 = std::min(grid.rows, r0 + args.block_rows);
    for (std::int64_t g = 0; g < groups; ++g) {
      const auto c0 = g * grid.group_size, c1 = std::min(grid.cols, c0 + grid.group_size);
      float lo = 0.0f, hi = 0.0f;
      for (std::int64_t r = r0; r < r1; ++r) {
        const auto [l, h] =
            minmax_of(w.subspan(static_cast<std::size_t>(r * grid.cols + c0), static_cast<std::size_t>(c1 - c0)));
        lo = std::min(lo, l);
        hi = std::max(hi, h);
      }
      const auto sz = scale_for_range(lo, hi, args, scale_dtype);
      for (std::int64_t r = r0; r < r1; ++r)
        grid.scale[static_cast<std::size_t>(r * groups + g)] = sz.scale;
    }
  }
}

// The columns one scale covers: a group's, a block's, else the whole row.
std::int64_t
columns_per_scale(const QuantArgs& args, std::int64_t cols) {
  switch (args.strategy) {
  case Strategy::group:
  case Strategy::tensor_group:
    return args.group_size;
  case Strategy::block:
    return args.block_cols;
  default:
    return cols;
  }
}

// Channel and group strategies: each row's groups' scales (and zero points), or FP4's scales with
// their codes under the grid's global scale.
void
fill_group_scales(QuantGrid& grid, std::span<const float> w, model::DType scale_dtype) {
  const auto& args = grid.args;
  const auto groups = grid.groups();
  if (args.is_fp4())
    grid.scale_codes.resize(grid.scale.size());
  for (std::int64_t r = 0; r < grid.rows; ++r)
    for (std::int64_t g = 0; g < groups; ++g) {
      const auto first = g * grid.group_size;
      const auto [lo, hi] =
          minmax_of(w.subspan(static_cast<std::size_t>(r * grid.cols + first),
                              static_cast<std::size_t>(std::min(grid.cols - first, grid.group_size))));
      const auto at = static_cast<std::size_t>(r * groups + g);
      if (args.is_fp4()) {
        std::tie(grid.scale[at], grid.scale_codes[at]) =
            fp4_group_scale(absmax_of(lo, hi), args, grid.global_scale, scale_dtype);
        continue;
      }
      const auto sz = scale_for_range(lo, hi, args, scale_dtype);
      grid.scale[at] = sz.scale;
      grid.zero[at] = sz.zero;
    }
}

} // namespace

float
nvfp4_global_scale(float absmax) {
  return 448.0f * 6.0f / std::max(absmax, std::numeric_limits<float>::min());
}

std::uint8_t
nvfp4_scale_code(float absmax_over_6, float global_scale) {
  const float scale = std::min(global_scale * absmax_over_6, 448.0f);
  const auto code = float_to_f8_e4m3(scale);
  return (code & 0x7f) == 0 ? kFp8ScaleFloorCode : code;
}

std::uint8_t
mxfp4_scale_code(float absmax) {
  // Rounded to BF16, then to a power of two (up from 1.75·2^e: BF16's 7 mantissa bits plus 2^5
  // carry into the exponent from mantissa 0.75), whose biased exponent less 2 is the code.
  const auto bits = static_cast<std::uint32_t>(model::float_to_bf16(std::fabs(absmax)));
  const auto exponent = static_cast<int>(((bits + 32u) >> 7) & 0xffu);
  return static_cast<std::uint8_t>(std::max(exponent - 2, 0));
}

float
e8m0_to_float(std::uint8_t code) {
  return std::ldexp(1.0f, static_cast<int>(code) - 127);
}

float
round_to_fp4(float x) {
  const float a = std::fabs(round_to_dtype(x, model::DType::bf16));
  float m = 0.0f;
  if (a > 5.0f)
    m = 6.0f;
  else if (a >= 3.5f)
    m = 4.0f;
  else if (a > 2.5f)
    m = 3.0f;
  else if (a >= 1.75f)
    m = 2.0f;
  else if (a > 1.25f)
    m = 1.5f;
  else if (a >= 0.75f)
    m = 1.0f;
  else if (a > 0.25f)
    m = 0.5f;
  return x < 0.0f ? -m : m; // a small negative x rounds to −0, as compressed-tensors' sign · 0
}

std::uint8_t
fp4_code(float value) {
  const float a = std::fabs(value);
  std::uint8_t code = 0;
  for (std::uint8_t i = 0; i < kFp4Magnitudes.size(); ++i)
    if (kFp4Magnitudes[i] == a)
      code = i;
  return static_cast<std::uint8_t>(code | (std::signbit(value) ? 0x8 : 0x0));
}

float
fp4_value(std::uint8_t code) {
  const float m = kFp4Magnitudes[code & 0x7];
  return (code & 0x8) ? -m : m;
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
             model::DType scale_dtype, std::optional<float> shared_absmax) {
  if (static_cast<std::int64_t>(w.size()) != rows * cols)
    throw InputError("compute_grid: weight size does not match its shape");
  QuantGrid grid;
  grid.args = args;
  grid.rows = rows;
  grid.cols = cols;
  grid.group_size = std::min(columns_per_scale(args, cols), cols);
  grid.scale.resize(static_cast<std::size_t>(rows * grid.groups()));
  grid.zero.assign(grid.scale.size(), 0.0f);
  if (args.strategy == Strategy::tensor) {
    const auto [lo, hi] = minmax_of(w);
    const auto sz = scale_for_range(lo, hi, args, scale_dtype);
    std::fill(grid.scale.begin(), grid.scale.end(), sz.scale);
    std::fill(grid.zero.begin(), grid.zero.end(), sz.zero);
  } else if (args.strategy == Strategy::block) {
    fill_block_scales(grid, w, scale_dtype);
  } else {
    if (args.has_global_scale()) {
      const auto [lo, hi] = minmax_of(w);
      grid.global_scale = nvfp4_global_scale(shared_absmax.value_or(absmax_of(lo, hi)));
    }
    fill_group_scales(grid, w, scale_dtype);
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
  if (args.is_fp4())
    return round_to_fp4(scaled);
  return std::nearbyint(scaled);
}

void
fake_quantize_activations(float* x, std::int64_t rows, std::int64_t cols, const QuantArgs& args, float global_scale) {
  auto quantize_span = [&](float* v, std::int64_t n) {
    float absmax = 0.0f;
    for (std::int64_t i = 0; i < n; ++i)
      absmax = std::max(absmax, std::fabs(v[i]));
    if (absmax <= 0.0f)
      return;
    const float scale =
        args.has_global_scale()
            ? model::f8_e4m3_to_float(nvfp4_scale_code(absmax / args.qmax(), global_scale)) / global_scale
            : absmax / args.qmax();
    for (std::int64_t i = 0; i < n; ++i)
      v[i] = quantize_value(v[i], scale, 0.0f, args) * scale;
  };
  switch (args.strategy) {
  case Strategy::token:
    for (std::int64_t r = 0; r < rows; ++r)
      quantize_span(x + r * cols, cols);
    break;
  case Strategy::group:
  case Strategy::tensor_group:
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; c += args.group_size)
        quantize_span(x + r * cols + c, std::min(args.group_size, cols - c));
    break;
  default:
    quantize_span(x, rows * cols);
  }
}

} // namespace optkit::quant
