// The optimizers as pure functions of (space, history, trial number, seed), the TPE numerics'
// special functions against reference values, and SLO-Tuner's hill-climb rules.
#include "tune/optimizer.hpp"
#include "tune/parzen_estimator.hpp"
#include "tune/truncated_normal.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>

using namespace optkit;
using namespace optkit::tune;

namespace {

SearchSpace
space(const char* yaml) {
  return parse_search_space(yaml, "test");
}

const char* one_int = "name: s\nparameters:\n  - {name: x, type: int, low: 0, high: 20, default: 2}\n";

} // namespace

TEST_CASE("normal tails and quantiles match reference values") {
  CHECK(std::exp(log_gauss_mass(-1, 1)) == doctest::Approx(0.6826894921370859).epsilon(1e-12));
  CHECK(log_ndtr(-40) == doctest::Approx(-804.6084420137538).epsilon(1e-10));
  CHECK(log_ndtr(0) == doctest::Approx(std::log(0.5)));
  CHECK(log_gauss_mass(30, 31) == doctest::Approx(log_gauss_mass(-31, -30)));
  CHECK(std::isfinite(log_gauss_mass(40, 41)));
  CHECK(ndtri(0.975) == doctest::Approx(1.959963984540054).epsilon(1e-12));
  CHECK(ndtri(1e-10) == doctest::Approx(-6.361340902404056).epsilon(1e-10));
  // Samples stay inside their truncation and follow it: the median of N(0,1) on [0, ∞) is 0.6745.
  RandomSource random(1);
  std::vector<double> draws;
  for (int i = 0; i < 20001; ++i)
    draws.push_back(truncnorm_from_uniform(random.uniform(), 0, 50, 0, 1));
  CHECK(*std::min_element(draws.begin(), draws.end()) >= 0);
  std::nth_element(draws.begin(), draws.begin() + 10000, draws.end());
  CHECK(draws[10000] == doctest::Approx(0.6745).epsilon(0.02));
}

TEST_CASE("Optuna's default weights ramp old observations after the newest 25") {
  CHECK(default_weights(3) == std::vector<double>{1, 1, 1});
  const auto w = default_weights(30);
  REQUIRE(w.size() == 30);
  CHECK(w[0] == doctest::Approx(1.0 / 30));
  CHECK(w[4] == doctest::Approx(1.0));
  CHECK(w[29] == 1.0);
}

TEST_CASE("random search is reproducible per (seed, trial) and stays on the grid") {
  const auto s = space("name: s\nparameters:\n  - {name: a, type: int, low: 1, high: 1024, log: true}\n"
                       "  - {name: b, type: float, low: 0, high: 1, step: 0.25}\n"
                       "  - {name: c, type: categorical, choices: [x, y, z]}\n");
  auto opt = make_random_search(s, 5);
  std::set<std::string> seen;
  for (int n = 0; n < 200; ++n) {
    const auto c = *opt->propose({}, n);
    CHECK_NOTHROW(s.check(c));
    CHECK(c == *opt->propose({}, n));
    seen.insert(c.dump());
  }
  CHECK(seen.size() > 150);
}

TEST_CASE("grid search visits the product once, conditionals included, then stops") {
  const auto s = space("name: s\nparameters:\n  - {name: m, type: categorical, choices: [a, b]}\n"
                       "  - {name: x, type: int, low: 0, high: 2, when: \"m=a\"}\n");
  auto opt = make_grid_search(s, 3);
  std::vector<Observation> history;
  for (int n = 0; n < 4; ++n) {
    const auto c = opt->propose(history, n);
    REQUIRE(c.has_value());
    history.push_back({n, *c, 0, 0});
  }
  CHECK(history[3].config == nlohmann::json{{"m", "b"}});
  CHECK_FALSE(opt->propose(history, 4).has_value());
}

TEST_CASE("TPE is a function of its history and seed, and models the good region") {
  const auto s = space("name: s\nparameters:\n  - {name: x, type: float, low: -10, high: 10}\n");
  const auto f = [](const nlohmann::json& c) { return -std::pow(c["x"].get<double>() - 3.0, 2); };
  auto tpe = make_tpe(s, TpeOptions{}, 7);
  std::vector<Observation> history;
  for (int n = 0; n < 40; ++n) {
    const auto c = *tpe->propose(history, n);
    history.push_back({n, c, f(c), 0});
  }
  auto again = make_tpe(s, TpeOptions{}, 7);
  CHECK(*again->propose(history, 40) == *tpe->propose(history, 40));
  auto other = make_tpe(s, TpeOptions{}, 8);
  CHECK(*other->propose(history, 40) != *tpe->propose(history, 40));
  // After the 10 random trials the proposals concentrate near x = 3.
  int near = 0;
  for (int n = 20; n < 40; ++n)
    near += std::abs(history[static_cast<std::size_t>(n)].config["x"].get<double>() - 3.0) < 2.0 ? 1 : 0;
  CHECK(near >= 8); // random search lands there 20 % of the time: 4 of 20
}

TEST_CASE("TPE ranks infeasible trials below every feasible one") {
  const auto s = space("name: s\nparameters:\n  - {name: x, type: float, low: 0, high: 100}\n");
  // High values look best but are infeasible; the feasible optimum is near 20.
  std::vector<Observation> history;
  for (int n = 0; n < 30; ++n) {
    const double x = 100.0 * n / 29;
    history.push_back({n, {{"x", x}}, x, x > 30 ? (x - 30) / 30 : 0.0});
  }
  auto tpe = make_tpe(s, TpeOptions{}, 3);
  int low = 0;
  for (int n = 30; n < 50; ++n)
    low += tpe->propose(history, n)->at("x").get<double>() < 45 ? 1 : 0;
  CHECK(low >= 14);
}

TEST_CASE("hill-climb follows SLO-Tuner's Algorithm 1") {
  const auto s = space(one_int);
  HillClimbOptions o;
  o.steps["x"] = 2;
  auto climb = make_hill_climb(s, o);
  const auto score = [](const nlohmann::json& c) { return -std::abs(c["x"].get<double>() - 10.0); };
  std::vector<Observation> history;
  for (int n = 0; n < 30; ++n) {
    const auto c = *climb->propose(history, n);
    history.push_back({n, c, score(c), 0});
  }
  // Steps of (K, K − 2, K + 2): 2 → 4 → 6 → 8 → 10, then it stays at 10.
  CHECK(history[0].config["x"] == 2);
  CHECK(history[1].config["x"] == 0);
  CHECK(history[2].config["x"] == 4);
  CHECK(history[3].config["x"] == 4);
  CHECK(history[12].config["x"] == 10);
  CHECK(history[27].config["x"] == 10);

  // A gain below δ does not move, unless K violates the SLO.
  HillClimbOptions strict = o;
  strict.delta = 5;
  auto stubborn = make_hill_climb(s, strict);
  std::vector<Observation> h2;
  for (int n = 0; n < 6; ++n) {
    const auto c = *stubborn->propose(h2, n);
    h2.push_back({n, c, score(c), 0});
  }
  CHECK(h2[3].config["x"] == 2);
  std::vector<Observation> h3;
  for (int n = 0; n < 6; ++n) {
    const auto c = *stubborn->propose(h3, n);
    h3.push_back({n, c, score(c), c["x"].get<double>() < 5 ? 1.0 : 0.0});
  }
  CHECK(h3[3].config["x"] == 4);
}
