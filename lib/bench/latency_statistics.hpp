// The statistics every bench figure uses, with one stated method: percentiles by linear
// interpolation between closest ranks (numpy's default, `np.percentile(..., method="linear")`),
// and percentile-bootstrap confidence intervals for the tail ones.
#pragma once

#include "core/statistics.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace optkit::bench {

using optkit::percentile_of_sorted; // core/statistics: linear interpolation, numpy's default

struct Interval {
  double low = 0;
  double high = 0;
};

// A 95 % percentile-bootstrap interval of the q-th percentile (`resamples` draws, seeded).
Interval bootstrap_percentile_interval(const std::vector<double>& values, double q, std::size_t resamples,
                                       std::uint64_t seed);

struct LatencySummary {
  std::size_t count = 0;
  double mean = -1, min = -1, max = -1;
  double p50 = -1, p90 = -1, p95 = -1, p99 = -1, p999 = -1;
  Interval p95_ci, p99_ci, p999_ci; // bootstrap, 95 %
  // The statistic an SLO names: "mean" (q < 0) or the q-th percentile; -1 when there are no values.
  double statistic(double q) const;
  std::vector<double> sorted; // the values, ascending (kept for SLO statistics at any q)
};

LatencySummary summarize_latencies(std::vector<double> values, std::uint64_t seed, std::size_t resamples = 200);

struct LinearFit {
  double slope = 0, intercept = 0, r = 0;
  std::size_t n = 0;
};
// Ordinary least squares of y on x.
LinearFit fit_line(const std::vector<double>& x, const std::vector<double>& y);

} // namespace optkit::bench
