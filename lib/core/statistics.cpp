#include "core/statistics.hpp"

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

} // namespace optkit
