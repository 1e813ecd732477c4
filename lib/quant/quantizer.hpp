// The quantization grid of compressed-tensors, bit for bit: symmetric scale max|x| / ((qmax -
// qmin) / 2) (int8: /127.5, int4: /7.5, FP8: /448), asymmetric scale (max - min) / (qmax - qmin)
// with a signed zero point, 0 always representable, scales clamped to >= fp32 epsilon and rounded
// to the dtype they are stored in; values divided by the scale, clamped to [qmin, qmax] before
// rounding half to even (integers) or casting to E4M3 (FP8). A mid-rise grid (optkit's delta
// format) has the symmetric scale and zero point -½: levels (q + ½)·s, ±max|x| at the ends.
#pragma once

#include "model/dtype.hpp"
#include "quant/quant_args.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace optkit::quant {

// Scales and zero points of a [rows, cols] weight: one per row and group (groups() per row; a
// channel grid has one group of all columns, a tensor grid one shared value repeated per row).
struct QuantGrid {
  QuantArgs args;
  std::int64_t rows = 0, cols = 0;
  std::int64_t group_size = 0; // columns per group (cols for channel and tensor)
  std::vector<float> scale;    // rows x groups()
  std::vector<float> zero;     // rows x groups(); all 0 when symmetric (-½ when mid-rise)

  std::int64_t groups() const { return (cols + group_size - 1) / group_size; }
  std::int64_t group_of(std::int64_t col) const { return col / group_size; }
  float scale_at(std::int64_t row, std::int64_t col) const {
    return scale[static_cast<std::size_t>(row * groups() + group_of(col))];
  }
  float zero_at(std::int64_t row, std::int64_t col) const {
    return zero[static_cast<std::size_t>(row * groups() + group_of(col))];
  }
};

// The scale and zero point for values in [lo, hi] (widened to include 0), with the scale rounded
// to `scale_dtype`.
struct ScaleZero {
  float scale = 1.0f;
  float zero = 0.0f;
};
ScaleZero scale_for_range(float lo, float hi, const QuantArgs& args, model::DType scale_dtype);

// Static min/max grid of a row-major [rows, cols] weight (the weights strategies: tensor,
// channel, group; a last group narrower than group_size is allowed).
QuantGrid compute_grid(std::span<const float> weight, std::int64_t rows, std::int64_t cols, const QuantArgs& args,
                       model::DType scale_dtype);

// The grid value of x: an integer in [qmin, qmax] (as float) or an FP8-representable value.
float quantize_value(float x, float scale, float zero, const QuantArgs& args);
inline float
dequantize_value(float q, float scale, float zero) {
  return (q - zero) * scale;
}
// quantize then dequantize.
inline float
fake_quantize(float x, float scale, float zero, const QuantArgs& args) {
  return dequantize_value(quantize_value(x, scale, zero, args), scale, zero);
}

// OCP FP8 E4M3 (e4m3fn) encoding of a finite value already within ±448, rounding to nearest even
// (subnormals included); NaN encodes as 0x7f.
std::uint8_t float_to_f8_e4m3(float value);

// Value rounded to what `dtype` (F32, BF16, F16) stores.
float round_to_dtype(float value, model::DType dtype);

// Per-row dynamic quantization of activations in place, as the serving kernels do it at run
// time: int8 with scale max|row| / 127, FP8 E4M3 with scale max|row| / 448 (token strategy), or
// one scale for the whole tensor.
void fake_quantize_activations(float* x, std::int64_t rows, std::int64_t cols, const QuantArgs& args);

} // namespace optkit::quant
