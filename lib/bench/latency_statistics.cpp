#include "bench/latency_statistics.hpp"

#include "core/random_source.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace optkit::bench {

Interval
bootstrap_percentile_interval(const std::vector<double>& values, double q, std::size_t resamples, std::uint64_t seed) {
  if (values.empty() || resamples == 0)
    return {-1, -1};
  RandomSource random(seed);
  std::vector<double> sample(values.size());
  std::vector<double> estimates;
  estimates.reserve(resamples);
  for (std::size_t r = 0; r < resamples; ++r) {
    for (auto& v : sample)
      v = values[random.below(values.size())];
    std::sort(sample.begin(), sample.end());
    estimates.push_back(percentile_of_sorted(sample, q));
  }
  std::sort(estimates.begin(), estimates.end());
  return {percentile_of_sorted(estimates, 2.5), percentile_of_sorted(estimates, 97.5)};
}

double
LatencySummary::statistic(double q) const {
  if (sorted.empty())
    return -1;
  return q < 0 ? mean : percentile_of_sorted(sorted, q);
}

LatencySummary
summarize_latencies(std::vector<double> values, std::uint64_t seed, std::size_t resamples) {
  LatencySummary s;
  std::sort(values.begin(), values.end());
  s.count = values.size();
  if (values.empty()) {
    s.p95_ci = s.p99_ci = s.p999_ci = {-1, -1};
    return s;
  }
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  s.min = values.front();
  s.max = values.back();
  s.p50 = percentile_of_sorted(values, 50);
  s.p90 = percentile_of_sorted(values, 90);
  s.p95 = percentile_of_sorted(values, 95);
  s.p99 = percentile_of_sorted(values, 99);
  s.p999 = percentile_of_sorted(values, 99.9);
  s.p95_ci = bootstrap_percentile_interval(values, 95, resamples, seed);
  s.p99_ci = bootstrap_percentile_interval(values, 99, resamples, seed + 1);
  s.p999_ci = bootstrap_percentile_interval(values, 99.9, resamples, seed + 2);
  s.sorted = std::move(values);
  return s;
}

LinearFit
fit_line(const std::vector<double>& x, const std::vector<double>& y) {
  LinearFit fit;
  fit.n = std::min(x.size(), y.size());
  if (fit.n < 2)
    return fit;
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < fit.n; ++i) {
    mx += x[i];
    my += y[i];
  }
  mx /= static_cast<double>(fit.n);
  my /= static_cast<double>(fit.n);
  double sxx = 0, syy = 0, sxy = 0;
  for (std::size_t i = 0; i < fit.n; ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (sxx <= 0)
    return fit;
  fit.slope = sxy / sxx;
  fit.intercept = my - fit.slope * mx;
  fit.r = syy > 0 ? sxy / std::sqrt(sxx * syy) : 0;
  return fit;
}

} // namespace optkit::bench
