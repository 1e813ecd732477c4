#include "hetero/variance_indicator.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace optkit::hetero {

std::vector<std::vector<double>>
variance_indicator(const std::vector<std::vector<LinearStatistics>>& layers, const std::vector<int>& bits) {
  std::vector<std::vector<double>> omega(layers.size(), std::vector<double>(bits.size(), 0.0));
  for (std::size_t i = 0; i < layers.size(); ++i)
    for (std::size_t b = 0; b < bits.size(); ++b) {
      if (bits[b] >= 16)
        continue;
      const double levels = std::ldexp(1.0, bits[b] - 1) - 1; // 2^(b−1) − 1
      for (const auto& op : layers[i]) {
        const double scale = op.max_abs_weight / levels;
        omega[i][b] += op.input_width * scale * scale * op.input_variance / 4.0;
      }
    }
  return normalise_to_lowest_bitwidth(std::move(omega), bits);
}

std::vector<std::vector<double>>
normalise_to_lowest_bitwidth(std::vector<std::vector<double>> omega, const std::vector<int>& bits) {
  if (bits.empty())
    return omega;
  const std::size_t lowest = static_cast<std::size_t>(std::min_element(bits.begin(), bits.end()) - bits.begin());
  double total = 0;
  for (const auto& row : omega)
    total += row[lowest];
  if (total > 0)
    for (auto& row : omega)
      for (auto& v : row)
        v /= total;
  return omega;
}

std::vector<std::vector<LinearStatistics>>
shape_only_statistics(const perf::ModelArch& m) {
  const double attention_width = double(m.heads) * m.head_dim;
  const std::vector<LinearStatistics> layer = {
      {"q_proj", double(m.hidden), 1, 1},          {"k_proj", double(m.hidden), 1, 1},
      {"v_proj", double(m.hidden), 1, 1},          {"o_proj", attention_width, 1, 1},
      {"gate_proj", double(m.hidden), 1, 1},       {"up_proj", double(m.hidden), 1, 1},
      {"down_proj", double(m.intermediate), 1, 1},
  };
  return std::vector<std::vector<LinearStatistics>>(std::size_t(m.layers), layer);
}

} // namespace optkit::hetero
