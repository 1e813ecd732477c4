// The quantization grid of compressed-tensors, bit for bit: symmetric scale max|x| / ((qmax -
// qmin) / 2) (int8: /127.5, int4: /7.5, FP8: /448), asymmetric scale (max - min) / (qmax - qmin)
// with a signed zero point, 0 always representable, scales clamped to >= fp32 epsilon and rounded
// to the dtype they are stored in; values divided by the scale, clamped to [qmin, qmax] before
// rounding half to even (integers) or casting to E4M3 (FP8). A mid-rise grid (optkit's delta
// format) has the symmetric scale and zero point -½: levels (q + ½)·s, ±max|x| at the ends.
// The 4-bit float grids follow compressed-tensors too: values divided by the scale are clamped
// to ±6 and rounded (through BF16, as its cast_to_fp4 does) to the nearest E2M1 value, ties to
// the even code. NVFP4's group scale is FP8(g · max|x|/6) under the tensor's global scale
// g = 448·6 / max|W| (an FP8 scale of 0 becomes 0.125), the value's scale being that FP8 value
// / g; MXFP4's is 2^(e−127) with e = (the BF16 exponent of max|x|, rounded up from 1.75) − 2.
// FP8 block scales are the symmetric FP8 scale of each tile.
#pragma once

#include "model/dtype.hpp"
#include "quant/quant_args.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace optkit::quant {

// Scales and zero points of a [rows, cols] weight: one per row and group (groups() per row; a
// channel grid has one group of all columns, a tensor grid one shared value repeated per row).
// A block grid keeps one scale per row and column block, equal across the rows of a row block.
struct QuantGrid {
  QuantArgs args;
  std::int64_t rows = 0, cols = 0;
  std::int64_t group_size = 0; // columns per group (cols for channel and tensor, block_cols for block)
  std::vector<float> scale;    // rows x groups(): what multiplies a grid value
  std::vector<float> zero;     // rows x groups(); all 0 when symmetric (-½ when mid-rise)
  // FP4 only, rows x groups(): the stored scale codes (NVFP4: FP8 E4M3 bits; MXFP4: the E8M0
  // biased exponent).
  std::vector<std::uint8_t> scale_codes;
  float global_scale = 0; // NVFP4: g (the stored group scale is scale · g); 0 otherwise

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
// channel, group, block, tensor_group; a last group or block narrower than its size is allowed).
// `shared_absmax`: NVFP4's global scale from this max|x| instead of the weight's own (llm-compressor
// gives q/k/v and gate/up one global scale, the largest of theirs, as vLLM fuses them).
QuantGrid compute_grid(std::span<const float> weight, std::int64_t rows, std::int64_t cols, const QuantArgs& args,
                       model::DType scale_dtype, std::optional<float> shared_absmax = std::nullopt);

// NVFP4's global scale for a tensor whose largest |x| is `absmax`: 448·6 / absmax, in fp32.
float nvfp4_global_scale(float absmax);
// NVFP4's FP8 group scale code for a group whose largest |x| is `absmax` (already rounded to the
// scale dtype's precision of absmax / 6 where the weights are BF16), under global scale g.
std::uint8_t nvfp4_scale_code(float absmax_over_6, float global_scale);
// MXFP4's E8M0 exponent code for a group whose largest |x| is `absmax`; its scale is 2^(code−127).
std::uint8_t mxfp4_scale_code(float absmax);
float e8m0_to_float(std::uint8_t code);

// FP4 E2M1: the nearest grid value of x (already divided by its scale and clamped to ±6), and
// the 4-bit code of a grid value (bit 3 the sign, bits 0-2 index 0, ½, 1, 1½, 2, 3, 4, 6).
float round_to_fp4(float x);
std::uint8_t fp4_code(float value);
float fp4_value(std::uint8_t code);

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

// Dynamic quantization of activations in place, as the serving kernels do it at run time: int8
// with scale max|x| / 127, FP8 E4M3 with scale max|x| / 448, per row (token), per row and group
// of columns (group: FP8 block's per-token groups), or one scale for the whole tensor; NVFP4
// (tensor_group, dynamic local) per row and group of 16 under the calibrated `global_scale`.
void fake_quantize_activations(float* x, std::int64_t rows, std::int64_t cols, const QuantArgs& args,
                               float global_scale = 0);

} // namespace optkit::quant
