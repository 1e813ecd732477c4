#include "core/statistics.hpp"

#include <algorithm>
#include <cmath>

namespace optkit {

SampleSummary
summarize(std::span<const double> values) {
  SampleSummary s;
  s.count = values.size();
  double sum = 0;
  for (double v : values) {
    sum += v;
  }
  s.mean = values.empty() ? std::nan("") : sum / static_cast<double>(values.size());
  double squares = 0;
  for (double v : values) {
    squares += (v - s.mean) * (v - s.mean);
  }
  s.stddev = values.size() > 1 ? std::sqrt(squares / static_cast<double>(values.size() - 1)) : 0.0;
  return s;
}

double
percentile_of_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty())
    return -1;
  const double h = (static_cast<double>(sorted.size()) - 1.0) * std::clamp(q, 0.0, 100.0) / 100.0;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

} // namespace optkit
