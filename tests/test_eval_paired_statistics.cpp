// Paired statistics against independent computations: exact McNemar p-values from Python's
// math.comb (2·Σ_{i≤min(b,c)} C(b+c, i) / 2^(b+c)), lm-eval's stderr from Python's
// statistics.stdev(x)/√n, and the bootstrap interval's coverage of the true recovery.
#include "core/error.hpp"
#include "eval/paired_statistics.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace optkit::eval;

namespace {

// b items passed only on the baseline, c only on the candidate, `both` on both, `neither` on none.
std::pair<std::vector<double>, std::vector<double>>
paired(int b, int c, int both, int neither) {
  std::vector<double> base, cand;
  for (int i = 0; i < b; ++i)
    base.push_back(1), cand.push_back(0);
  for (int i = 0; i < c; ++i)
    base.push_back(0), cand.push_back(1);
  for (int i = 0; i < both; ++i)
    base.push_back(1), cand.push_back(1);
  for (int i = 0; i < neither; ++i)
    base.push_back(0), cand.push_back(0);
  return {base, cand};
}

} // namespace

TEST_CASE("exact McNemar matches the binomial sum") {
  struct Case {
    int b, c;
    double p;
  };
  for (const auto& k : {Case{10, 2, 0.03857421875}, Case{30, 0, 1.862645149230957e-09}, Case{5, 5, 1.0},
                        Case{0, 1, 1.0}, Case{40, 25, 0.08168153394154005}}) {
    const auto [base, cand] = paired(k.b, k.c, 50, 20);
    const auto m = exact_mcnemar(base, cand);
    CHECK(m.baseline_only == k.b);
    CHECK(m.candidate_only == k.c);
    CHECK(m.p_value == doctest::Approx(k.p).epsilon(1e-9));
  }
  const std::vector<double> one{1}, two{1, 0};
  CHECK_THROWS_AS(exact_mcnemar(one, two), optkit::InputError);
}

TEST_CASE("lm-eval's stderr: sample standard deviation over √n") {
  const std::vector<double> x{1, 0, 1, 1, 0, 1, 0, 0, 1, 1};
  CHECK(mean_stderr(x) == doctest::Approx(0.16329931618554522).epsilon(1e-12));
  CHECK(mean_stderr(std::vector<double>{1}) == 0);
}

TEST_CASE("recovery and its paired bootstrap interval") {
  const auto [base, cand] = paired(30, 0, 50, 20); // baseline 0.8, candidate 0.5
  const auto r = compare_paired(base, cand);
  CHECK(r.baseline_mean == doctest::Approx(0.8));
  CHECK(r.candidate_mean == doctest::Approx(0.5));
  CHECK(r.recovery == doctest::Approx(0.625));
  CHECK(r.recovery_low < r.recovery);
  CHECK(r.recovery_high > r.recovery);
  CHECK(r.recovery_high < 0.75); // 30 discordant items all one way: far from full recovery
  CHECK(r.binary);
  CHECK(r.p_value == doctest::Approx(1.862645149230957e-09).epsilon(1e-9));
}

TEST_CASE("the 95 % interval covers the true recovery about 95 % of the time") {
  // Baseline passes with p 0.7; the candidate keeps each pass with p 0.9 (true recovery 0.9).
  std::mt19937_64 rng(7);
  std::bernoulli_distribution base_pass(0.7), keep(0.9);
  int covered = 0;
  const int experiments = 200;
  BootstrapOptions options;
  options.resamples = 1000;
  for (int e = 0; e < experiments; ++e) {
    std::vector<double> base, cand;
    for (int i = 0; i < 300; ++i) {
      const bool b = base_pass(rng);
      base.push_back(b ? 1 : 0);
      cand.push_back(b && keep(rng) ? 1 : 0);
    }
    options.seed = static_cast<std::uint64_t>(e);
    const auto r = compare_paired(base, cand, options);
    covered += (r.recovery_low <= 0.9 && 0.9 <= r.recovery_high) ? 1 : 0;
  }
  CHECK(covered >= 180); // 90 %: well inside the binomial spread of a 95 % interval over 200 runs
  CHECK(covered <= 199);
}

TEST_CASE("continuous scores use the paired bootstrap test") {
  std::vector<double> base, same, shifted;
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0, 1);
  for (int i = 0; i < 200; ++i) {
    const double x = 10 + noise(rng);
    base.push_back(x);
    same.push_back(x + 0.01 * noise(rng));
    shifted.push_back(x - 0.5 + 0.1 * noise(rng));
  }
  const auto a = compare_paired(base, same);
  const auto b = compare_paired(base, shifted);
  CHECK_FALSE(a.binary);
  CHECK(a.p_value > 0.01);
  CHECK(b.p_value < 0.001);
  CHECK(b.recovery == doctest::Approx(0.95).epsilon(0.01));
}

TEST_CASE("spread across trials: mean, sample STD, RSD") {
  const std::vector<double> acc{0.70, 0.72, 0.71, 0.69, 0.73};
  const auto s = trial_spread(acc);
  CHECK(s.trials == 5);
  CHECK(s.mean == doctest::Approx(0.71));
  CHECK(s.stddev == doctest::Approx(0.015811388300841896));
  CHECK(s.rsd == doctest::Approx(0.015811388300841896 / 0.71));
}

TEST_CASE("Holm's step-down adjustment") {
  // Sorted 0.005, 0.01, 0.03, 0.04 → ×4, ×3, ×2, ×1 = 0.02, 0.03, 0.06, 0.04 → running max.
  const auto adjusted = holm_adjust({0.01, 0.04, 0.03, 0.005});
  REQUIRE(adjusted.size() == 4);
  CHECK(adjusted[0] == doctest::Approx(0.03));
  CHECK(adjusted[1] == doctest::Approx(0.06));
  CHECK(adjusted[2] == doctest::Approx(0.06));
  CHECK(adjusted[3] == doctest::Approx(0.02));
  CHECK(holm_adjust({0.9, 0.8}) == std::vector<double>{1.0, 1.0});
  CHECK(holm_adjust({}).empty());
}
