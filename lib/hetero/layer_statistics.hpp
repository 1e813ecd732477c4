// What SplitQuant's indicators need from a real model (seed 003 §IV-B), measured on a model
// folder: the unquantized model runs calibration sequences layer by layer through optkit's runtime
// (each layer's output is the next layer's input), and each linear operator's input is summarised
// as it passes — Var[X] over all its entries, the variance indicator's G(X) — while its weight
// gives D_o (the input width) and max|W_o|. With `hessian`, the same pass also accumulates each
// input's H = 2/N · Σ XᵀX; its top eigenvalue λ (power iteration) times the weight's
// round-to-nearest error ‖Q_b(W) − W‖² at each bitwidth (symmetric, groups of 128, as compress
// quantizes) is the Hessian indicator SplitQuant compares against (§IV-B, Table V). The two
// indicators' own costs are timed apart from the forward pass they share.
#pragma once

#include "hetero/variance_indicator.hpp"

#include <cstdint>
#include <filesystem>
#include <vector>

namespace optkit::hetero {

struct StatisticsOptions {
  std::vector<int> bits; // the Hessian indicator's bitwidths
  bool hessian = false;
  unsigned threads = 0; // 0: one per available CPU
};

struct MeasuredStatistics {
  std::vector<std::vector<LinearStatistics>> layers; // [decoder layer][linear operator]
  std::vector<std::vector<double>> hessian_omega;    // [layer][bit option], normalised; empty unless asked
  std::int64_t tokens = 0;                           // calibration tokens through each layer
  double forward_seconds = 0;                        // loading and the calibration pass, shared by both
  double variance_seconds = 0;                       // input moments and weight maxima
  double hessian_seconds = 0;                        // Σ XᵀX, power iterations, quantization errors
};

// InputError when the folder holds no model optkit's runtime loads or `samples` is empty.
MeasuredStatistics measure_layer_statistics(const std::filesystem::path& model_dir,
                                            const std::vector<std::vector<std::int32_t>>& samples,
                                            const StatisticsOptions& options);

// The largest eigenvalue of the symmetric [n, n] matrix `a` (positive semi-definite), by power
// iteration to a relative change below 1e-6 (at most 500 steps).
double top_eigenvalue(const std::vector<float>& a, std::int64_t n);

} // namespace optkit::hetero
