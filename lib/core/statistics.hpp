// Summary statistics of a sample, shared by every command that reports spread across trials.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace optkit {

struct SampleSummary {
  std::size_t count = 0;
  double mean = 0;   // NaN when empty
  double stddev = 0; // sample standard deviation (n − 1), 0 for a single value
};

SampleSummary summarize(std::span<const double> values);

// The q-th percentile (q in [0, 100]) by linear interpolation between closest ranks (numpy's
// default, `np.percentile(..., method="linear")`); `sorted` ascending; -1 when it is empty.
double percentile_of_sorted(const std::vector<double>& sorted, double q);

} // namespace optkit
