// AWQ's weight clipping, as its reference implementations run it after the scale search (llm-awq
// and AutoAWQ's auto_clip; llm-compressor's AWQModifier leaves it out): for each output row and
// quantization group, the largest |w| the group keeps is searched over max|w|·(1 − k/grid),
// k = 0 … grid·max_shrink − 1, and the group is clamped to the bound whose quantization has the
// least output error on the calibration inputs, (q − w)ᵀ H_gg (q − w) with H the Hessian of the
// linear's inputs (2/N·XᵀX: the mean over every calibration token, where the reference samples
// 512) and q the clamped group quantized on its own min/max grid. Bound 1 (no clipping) is a
// candidate, so clipping never raises a group's error.
#pragma once

#include "model/dtype.hpp"
#include "quant/quant_args.hpp"

#include <cstdint>
#include <span>

namespace optkit::quant {

struct AwqClipOptions {
  int grid = 20;           // AutoAWQ's n_grid
  double max_shrink = 0.5; // the smallest bound tried is max|w|·(1 − max_shrink) + one step
};

// Clamps W [rows, cols] (row-major, quantized by `args` in groups along the columns) in place;
// `hessian` [cols, cols]. Returns the summed output error before and after.
struct ClipResult {
  double error_before = 0;
  double error_after = 0;
};
ClipResult awq_clip(std::span<float> weight, std::int64_t rows, std::int64_t cols, std::span<const float> hessian,
                    const QuantArgs& args, model::DType scale_dtype, const AwqClipOptions& options = {});

} // namespace optkit::quant
