// One parameter's Parzen estimator as Optuna's univariate TPE builds it (optuna/samplers/_tpe/
// parzen_estimator.py, v3.1–v4.x numerics): a mixture with one truncated-normal kernel per
// observation plus a prior kernel at the centre of the range with σ = the range; weights from
// Optuna's default_weights (older observations ramped down beyond the newest 25) with the prior's
// weight appended; univariate bandwidths = the larger gap to a neighbour among the sorted centres
// padded with the range's ends (the outermost using only their inner gap), clipped to
// [range/min(100, 1 + kernels), range] ("magic clip"). Log-scaled parameters are modelled in log
// space; stepped ones on bounds widened by half a step, scored by the kernel's mass over their
// cell. Categoricals: each kernel a row of prior_weight/(n + 1) everywhere plus 1 at its observed
// choice, normalised.
#pragma once

#include "core/random_source.hpp"
#include "tune/search_space.hpp"

#include <span>
#include <vector>

namespace optkit::tune {

struct ParzenOptions {
  double prior_weight = 1.0;
  bool magic_clip = true;
  bool endpoints = false; // consider_endpoints
};

// Optuna's default_weights(n): n < 25 → ones; otherwise linspace(1/n, 1, n − 25) then 25 ones.
std::vector<double> default_weights(std::size_t n);

class ParzenEstimator {
public:
  // `observations` in the parameter's internal representation, oldest first.
  ParzenEstimator(const Parameter& parameter, std::span<const double> observations, const ParzenOptions& options);

  // Draws in the internal representation (on the grid, within bounds).
  std::vector<double> sample(RandomSource& random, std::size_t count) const;
  double log_pdf(double internal) const;

  const std::vector<double>& weights() const { return m_weights; }
  const std::vector<double>& mus() const { return m_mus; }
  const std::vector<double>& sigmas() const { return m_sigmas; }

private:
  double to_model(double internal) const;   // log for log-scaled parameters
  double from_model(double modelled) const; // back, rounded to the grid and clipped

  const Parameter& m_parameter;
  std::vector<double> m_weights;
  double m_low = 0, m_high = 0, m_q = 0; // model-space bounds; q > 0 for stepped parameters
  std::vector<double> m_mus, m_sigmas;
  std::vector<std::vector<double>> m_categorical; // kernel × choice
};

} // namespace optkit::tune
