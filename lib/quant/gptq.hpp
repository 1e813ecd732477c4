// One-shot layer compression by optimal brain surgeon updates: GPTQ (Frantar et al. 2023) and
// SparseGPT 2:4 (Frantar & Alistarh 2023) share one loop. Columns are visited in blocks of
// `block_size`; each column is quantized (and, for 2:4, pruned by the mask chosen for its group
// of four on the already-updated weights), and its error, scaled by the inverse Hessian's
// Cholesky factor, is propagated into the columns not yet visited: eagerly inside the block,
// lazily (one matrix product) beyond it. Group scales are fixed up front from the original W
// ("static groups"), so act-order needs no g_idx at inference. RTN is the same grid without the
// error propagation.
#pragma once

#include "model/dtype.hpp"
#include "quant/quant_args.hpp"
#include "quant/quantizer.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace optkit {
class ThreadPool;
}

namespace optkit::quant {

struct GptqOptions {
  std::int64_t block_size = 128;
  double dampening = 0.01;      // fraction of mean(diag H) added to the diagonal
  int max_damping_attempts = 4; // each retry multiplies the dampening by 10
  bool act_order = false;       // visit columns by decreasing diag(H) (scales stay per original group)
  bool sparse_2_4 = false;      // SparseGPT: prune 2 of every 4 consecutive input weights per row
  std::string layer;            // names the layer in errors
};

// A compressed [rows, cols] weight: the grid values (q, original column order; where pruned, the
// grid value of 0 — or 0 on a mid-rise grid, which has no zero level), the 2:4 mask, the grid,
// and the reconstructed fp32 weight the next layers are calibrated on.
struct CompressedMatrix {
  std::int64_t rows = 0, cols = 0;
  std::optional<QuantGrid> grid;  // absent: pruned only, values kept in fp32
  std::vector<float> q;           // rows x cols grid values: integers or FP8 values (empty: no grid)
  std::vector<std::uint8_t> kept; // 2:4 only: rows x cols, 1 where the value is kept, 0 where pruned
  std::vector<float> weight;      // reconstruction, rows x cols
  double loss = 0;                // Σ (w - q)² / d² / 2 (GPTQ's own objective), 0 for RTN
  double dampening = 0;           // the dampening fraction that succeeded
  int damping_attempts = 0;
};

// `hessian` is H (cols x cols, both triangles) from Hessian::matrix(). GPTQ borrows its buffer to
// factor H⁻¹ in (no second cols x cols matrix) and gives it back bit for bit, also when it throws.
// Throws RuntimeFailure when H + dampening·mean(diag H)·I is not positive definite after every
// retry (never falls back to RTN).
CompressedMatrix gptq(std::span<const float> weight, std::int64_t rows, std::int64_t cols, std::span<float> hessian,
                      const std::optional<QuantArgs>& args, model::DType scale_dtype, const GptqOptions& options,
                      ThreadPool& pool);

// Round to nearest on the static grid (no calibration); `shared_absmax` as compute_grid's.
CompressedMatrix rtn(std::span<const float> weight, std::int64_t rows, std::int64_t cols, const QuantArgs& args,
                     model::DType scale_dtype, std::optional<float> shared_absmax = std::nullopt);

// tr(E H Eᵀ) and tr(W H Wᵀ) with E = W - Ŵ: ‖(W - Ŵ)X‖² and ‖WX‖² over the calibration inputs.
// Each is a sum over rows, so a matrix's terms are the sums of its row blocks' terms.
struct OutputErrorTerms {
  double error = 0, reference = 0;
};
OutputErrorTerms output_error_terms(std::span<const float> weight, std::span<const float> reconstruction,
                                    std::int64_t rows, std::int64_t cols, std::span<const float> hessian);

// Relative output error of a reconstruction: error / reference of its terms (0 for a zero W).
double relative_output_error(std::span<const float> weight, std::span<const float> reconstruction, std::int64_t rows,
                             std::int64_t cols, std::span<const float> hessian);

} // namespace optkit::quant
