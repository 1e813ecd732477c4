// Summary statistics of a sample, shared by every command that reports spread across trials.
#pragma once

#include <cstddef>
#include <span>

namespace optkit {

struct SampleSummary {
  std::size_t count = 0;
  double mean = 0;   // NaN when empty
  double stddev = 0; // sample standard deviation (n − 1), 0 for a single value
};

SampleSummary summarize(std::span<const double> values);

} // namespace optkit
