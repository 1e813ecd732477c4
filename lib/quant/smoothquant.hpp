// SmoothQuant (Xiao et al. 2023): migrate activation outliers into the weights with a per-input-
// channel factor s_j = max|X_j|^α / max|W_j|^(1-α) (the weight maximum taken over every linear
// layer reading X, both clamped >= 1e-5). X' = X·diag(s)⁻¹ is folded into the preceding norm's
// weight and W' = W·diag(s) into the layers, so the model computes the same function while
// per-token activation quantization loses less.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace optkit::quant {

// `activation_absmax` per input channel; `weights` the row-major [rows_i, cols] matrices of the
// layers that read the same input.
std::vector<float> smoothing_factors(std::span<const float> activation_absmax,
                                     const std::vector<std::span<const float>>& weights, std::int64_t cols,
                                     double alpha);

// W·diag(s): column j of a row-major [rows, cols] weight times s_j.
void scale_columns(std::span<float> weight, std::int64_t cols, std::span<const float> s);

} // namespace optkit::quant
