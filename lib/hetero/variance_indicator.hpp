// SplitQuant's variance indicator (seed 003, Theorem 1 and Proposition 1): the extra output
// variance weight-only quantization at b bits adds to a layer,
//   ω_{i,b} = Σ_o D_o · S_o(b)² · G(X_o),   S_o(b) = max|W_o| / (2^(b−1) − 1),   G = Var[X_o] / 4
// (symmetric scales, deterministic rounding), D_o the products each output of operator o sums
// (its input width). 16-bit layers are not quantized: ω = 0. The indicator ranks layers and
// bitwidths; its scale is fixed by normalising so that every layer at the lowest bitwidth sums to 1.
#pragma once

#include "perf/model_arch.hpp"

#include <string>
#include <vector>

namespace optkit::hetero {

struct LinearStatistics {
  std::string name;          // q_proj, k_proj, …
  double input_width = 0;    // D_o
  double max_abs_weight = 0; // max |W_o|
  double input_variance = 0; // Var[X_o]
};

// ω[layer][bit option], normalised (Σ_layers ω[·][lowest] = 1 when any layer has a nonzero one).
std::vector<std::vector<double>> variance_indicator(const std::vector<std::vector<LinearStatistics>>& layers,
                                                    const std::vector<int>& bits);

// ω scaled so that every layer at the lowest bitwidth sums to 1 (unchanged when that sum is 0).
std::vector<std::vector<double>> normalise_to_lowest_bitwidth(std::vector<std::vector<double>> omega,
                                                              const std::vector<int>& bits);

// Without weights (a preset or a config.json): every operator with max|W| = 1 and Var[X] = 1, so
// layers differ only by their shapes — identical for a dense decoder: the planner then trades
// bitwidth against latency with every layer equally sensitive.
std::vector<std::vector<LinearStatistics>> shape_only_statistics(const perf::ModelArch& model);

} // namespace optkit::hetero
