// AWQ's activation-aware scale search (Lin et al. 2024), as llm-compressor's AWQModifier applies
// it before a weight-only quantizer. The linears that read one input (the balance layers) get
// per-input-channel factors s: W' = W·diag(s), folded back by dividing the layer that produces the
// input (its norm, or the rows of v_proj / up_proj) by s, so the model's function is unchanged
// before quantization while salient channels — those with large activations — keep more
// precision after it. Candidates (duo scaling): s = x̄^r / (w̄^(1−r) + 1e−4), clamped ≥ 1e−4 and
// divided by √(max s · min s), where x̄ is the mean |x| per channel over the calibration tokens
// and w̄ the mean over rows of |W| normalised by its quantization group's max|W|; r takes the
// grid's ratios, and s = 1 is a candidate too. The caller measures each candidate's output error
// with the balance layers replaced by Q(W·diag(s))·diag(s)⁻¹ (the parent module's output, as
// llm-compressor does), and the least error wins.
#pragma once

#include "model/dtype.hpp"
#include "quant/quant_args.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace optkit::quant {

struct AwqOptions {
  int grid = 20;           // candidate ratios (llm-compressor's n_grid)
  bool duo_scaling = true; // weight magnitudes enter the factors (llm-compressor's default)
  bool clip = false;       // then clip each group's range (awq_clip.hpp; llm-awq's auto_clip)
};

struct AwqCandidate {
  double ratio = 0;
  bool duo = false; // ratio 0 without duo scaling is s = 1
  std::vector<float> scales;
};

struct AwqSearch {
  AwqCandidate best;
  double error = 0;          // the winner's output error
  double identity_error = 0; // s = 1's
};

// The candidates, in llm-compressor's order: s = 1, then duo scaling's grid − 1 ratios
// k/(grid − 2); without duo scaling the grid's ratios k/(grid − 1). `input_mean_abs` x̄ per input
// channel; `weights` the balance layers, each row-major [rows_i, cols], quantized in groups of
// `group_size` columns.
std::vector<AwqCandidate> awq_candidates(std::span<const float> input_mean_abs,
                                         const std::vector<std::span<const float>>& weights, std::int64_t cols,
                                         std::int64_t group_size, const AwqOptions& options);

// Q(W·diag(s))·diag(s)⁻¹: W [rows, cols] scaled, rounded to nearest on `args`' grid (scales in
// `scale_dtype`), and scaled back.
std::vector<float> awq_fake_quantized(std::span<const float> weight, std::int64_t rows, std::int64_t cols,
                                      std::span<const float> s, const QuantArgs& args, model::DType scale_dtype);

// The output error of one linear as its own parent: Σ_i tr(E_i H E_iᵀ), E_i = Q(W_i·diag(s))·diag(s)⁻¹ − W_i,
// with H the Hessian of the balance layers' common input.
double awq_linear_error(const std::vector<std::span<const float>>& weights, std::int64_t cols, std::span<const float> s,
                        std::span<const float> hessian, const QuantArgs& args, model::DType scale_dtype);

// The candidate of least `error_of` (ties: the earlier).
AwqSearch search_awq(std::vector<AwqCandidate> candidates, const std::function<double(const AwqCandidate&)>& error_of);

} // namespace optkit::quant
