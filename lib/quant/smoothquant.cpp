#include "quant/smoothquant.hpp"

#include <algorithm>
#include <cmath>

namespace optkit::quant {

std::vector<float>
smoothing_factors(std::span<const float> activation_absmax, const std::vector<std::span<const float>>& weights,
                  std::int64_t cols, double alpha) {
  const auto n = static_cast<std::size_t>(cols);
  std::vector<float> weight_absmax(n, 0.0f);
  for (const auto& w : weights)
    for (std::size_t i = 0; i < w.size(); ++i)
      weight_absmax[i % n] = std::max(weight_absmax[i % n], std::fabs(w[i]));
  std::vector<float> s(n);
  for (std::size_t j = 0; j < n; ++j) {
    const double a = std::max(static_cast<double>(activation_absmax[j]), 1e-5);
    const double w = std::max(static_cast<double>(weight_absmax[j]), 1e-5);
    s[j] = static_cast<float>(std::max(std::pow(a, alpha) / std::pow(w, 1.0 - alpha), 1e-5));
  }
  return s;
}

void
scale_columns(std::span<float> weight, std::int64_t cols, std::span<const float> s) {
  const auto n = static_cast<std::size_t>(cols);
  for (std::size_t i = 0; i < weight.size(); ++i)
    weight[i] *= s[i % n];
}

} // namespace optkit::quant
