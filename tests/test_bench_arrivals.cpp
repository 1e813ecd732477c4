#include "bench/arrivals.hpp"
#include "core/random_source.hpp"

#include "core/error.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace optkit::bench;

namespace {

// Squared coefficient of variation of the gaps: 1 for Poisson, 1/shape for gamma, 0 for constant.
double
gap_cv2(const std::vector<double>& offsets) {
  std::vector<double> gaps;
  for (std::size_t i = 1; i < offsets.size(); ++i)
    gaps.push_back(offsets[i] - offsets[i - 1]);
  double mean = 0, var = 0;
  for (double g : gaps)
    mean += g / static_cast<double>(gaps.size());
  for (double g : gaps)
    var += (g - mean) * (g - mean) / static_cast<double>(gaps.size() - 1);
  return var / (mean * mean);
}

} // namespace

TEST_CASE("Poisson and gamma schedules end exactly at count/rate and have the asked-for burstiness") {
  const std::size_t n = 20000;
  const auto poisson = arrival_offsets({ArrivalProcess::poisson, 50, 1, 3}, n);
  CHECK(poisson.back() == doctest::Approx(n / 50.0));
  CHECK(gap_cv2(poisson) == doctest::Approx(1.0).epsilon(0.05));
  const auto bursty = arrival_offsets({ArrivalProcess::gamma, 50, 0.25, 3}, n);
  CHECK(bursty.back() == doctest::Approx(n / 50.0));
  CHECK(gap_cv2(bursty) == doctest::Approx(4.0).epsilon(0.1));
  const auto smooth = arrival_offsets({ArrivalProcess::gamma, 50, 4, 3}, n);
  CHECK(gap_cv2(smooth) == doctest::Approx(0.25).epsilon(0.1));
  const auto constant = arrival_offsets({ArrivalProcess::constant, 4, 1, 0}, 5);
  CHECK(constant == std::vector<double>{0, 0.25, 0.5, 0.75, 1.0});
  for (std::size_t i = 1; i < poisson.size(); ++i)
    REQUIRE(poisson[i] >= poisson[i - 1]);
}

TEST_CASE("the same seed gives the same schedule; another seed another") {
  const auto a = arrival_offsets({ArrivalProcess::poisson, 10, 1, 42}, 100);
  CHECK(a == arrival_offsets({ArrivalProcess::poisson, 10, 1, 42}, 100));
  CHECK(a != arrival_offsets({ArrivalProcess::poisson, 10, 1, 43}, 100));
}

TEST_CASE("trace replay sorts, shifts to zero and scales time") {
  CHECK(replay_offsets({105, 101, 103}, 2) == std::vector<double>{0, 1, 2});
  CHECK_THROWS_AS(replay_offsets({1}, 0), optkit::InputError);
  CHECK_THROWS_AS(arrival_offsets({ArrivalProcess::poisson, 0, 1, 0}, 3), optkit::InputError);
}

TEST_CASE("the random source's distributions have their moments") {
  optkit::RandomSource random(9);
  double sum = 0, sum2 = 0, gamma_sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double z = random.normal();
    sum += z;
    sum2 += z * z;
    gamma_sum += random.gamma(0.5);
  }
  CHECK(sum / n == doctest::Approx(0).epsilon(0.01));
  CHECK(sum2 / n == doctest::Approx(1).epsilon(0.02));
  CHECK(gamma_sum / n == doctest::Approx(0.5).epsilon(0.02));
}
