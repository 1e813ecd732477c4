// Percentiles pinned to Python's statistics.quantiles(method="inclusive"), an independent
// implementation of the same rule numpy's default uses (linear interpolation, R type 7).
#include "bench/latency_statistics.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace optkit::bench;

TEST_CASE("percentiles interpolate linearly between closest ranks, as numpy's default") {
  std::vector<double> x = {0.31, 0.02, 0.77, 0.45, 0.12, 0.98, 0.5, 0.66, 0.05, 0.4, 0.83};
  std::sort(x.begin(), x.end());
  CHECK(percentile_of_sorted(x, 10) == doctest::Approx(0.05));
  CHECK(percentile_of_sorted(x, 50) == doctest::Approx(0.45));
  CHECK(percentile_of_sorted(x, 90) == doctest::Approx(0.83));
  CHECK(percentile_of_sorted(x, 95) == doctest::Approx(0.905));
  CHECK(percentile_of_sorted(x, 99) == doctest::Approx(0.965));
  CHECK(percentile_of_sorted(x, 99.9) == doctest::Approx(0.9785));
  CHECK(percentile_of_sorted(x, 0) == 0.02);
  CHECK(percentile_of_sorted(x, 100) == 0.98);
  CHECK(percentile_of_sorted({1.0, 2.0}, 75) == doctest::Approx(1.75));
  CHECK(percentile_of_sorted({3.0}, 99) == 3.0);
  CHECK(percentile_of_sorted({}, 50) == -1);
}

TEST_CASE("a summary carries every percentile, the mean and bootstrap intervals around the tail") {
  std::vector<double> values;
  for (int i = 1; i <= 1000; ++i)
    values.push_back(i / 1000.0);
  const auto s = summarize_latencies(values, 7);
  CHECK(s.count == 1000);
  CHECK(s.mean == doctest::Approx(0.5005));
  CHECK(s.p99 == doctest::Approx(0.99001));
  CHECK(s.p99_ci.low <= s.p99);
  CHECK(s.p99_ci.high >= s.p99);
  CHECK(s.p99_ci.high - s.p99_ci.low < 0.05);
  CHECK(s.statistic(-1) == doctest::Approx(0.5005));
  CHECK(s.statistic(50) == doctest::Approx(0.5005));
  // Same seed, same interval.
  const auto again = summarize_latencies(values, 7);
  CHECK(again.p99_ci.low == s.p99_ci.low);
  CHECK(again.p99_ci.high == s.p99_ci.high);
}

TEST_CASE("least squares recovers a line and its correlation") {
  const auto fit = fit_line({0, 1, 2, 3, 4}, {1, 3, 5, 7, 9});
  CHECK(fit.slope == doctest::Approx(2));
  CHECK(fit.intercept == doctest::Approx(1));
  CHECK(fit.r == doctest::Approx(1));
  CHECK(fit_line({1, 1, 1}, {1, 2, 3}).slope == 0); // no spread in x: no fit
}
