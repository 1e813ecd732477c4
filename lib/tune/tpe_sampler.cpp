// Optuna's TPESampler with its v4 defaults (univariate, no constant liar; reference note §10):
// random configurations for the first n_startup_trials, then per parameter in space order a
// split of the completed trials into the best ⌈γ·n⌉ ("below") and the rest, a Parzen estimator
// on each group's values of that parameter, 24 candidates drawn from the below one and the one
// maximising log l(x) − log g(x) taken (the first on ties). Infeasible trials are ranked as
// Optuna's constraints_func ranks them: every feasible trial before any infeasible one, the
// infeasible by their violation.
#include "core/random_source.hpp"
#include "tune/optimizer.hpp"
#include "tune/parzen_estimator.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace optkit::tune {

namespace {

// Optuna's _split_observation_pairs with constraints: indices of the below and above groups,
// each in trial order.
std::pair<std::vector<std::size_t>, std::vector<std::size_t>>
split(const std::vector<Observation>& history, std::size_t n_below) {
  std::vector<std::size_t> by_violation(history.size());
  std::iota(by_violation.begin(), by_violation.end(), std::size_t{0});
  std::stable_sort(by_violation.begin(), by_violation.end(),
                   [&](std::size_t a, std::size_t b) { return history[a].violation < history[b].violation; });
  std::vector<std::size_t> below, above;
  if (n_below >= history.size() || history[by_violation[n_below]].violation > 0) {
    below.assign(by_violation.begin(),
                 by_violation.begin() + static_cast<std::ptrdiff_t>(std::min(n_below, history.size())));
    above.assign(by_violation.begin() + static_cast<std::ptrdiff_t>(below.size()), by_violation.end());
  } else {
    std::vector<std::size_t> feasible;
    for (std::size_t i = 0; i < history.size(); ++i)
      if (history[i].violation <= 0)
        feasible.push_back(i);
      else
        above.push_back(i);
    std::stable_sort(feasible.begin(), feasible.end(),
                     [&](std::size_t a, std::size_t b) { return history[a].value > history[b].value; });
    below.assign(feasible.begin(), feasible.begin() + static_cast<std::ptrdiff_t>(n_below));
    above.insert(above.end(), feasible.begin() + static_cast<std::ptrdiff_t>(n_below), feasible.end());
  }
  std::sort(below.begin(), below.end());
  std::sort(above.begin(), above.end());
  return {below, above};
}

class TpeSampler final : public Optimizer {
public:
  TpeSampler(const SearchSpace& space, const TpeOptions& options, std::uint64_t seed)
      : m_space(space), m_options(options), m_seed(seed) {
    m_parzen.prior_weight = options.prior_weight;
    m_parzen.magic_clip = options.magic_clip;
    m_parzen.endpoints = options.endpoints;
  }

  std::optional<nlohmann::json> propose(const std::vector<Observation>& history, int number) override {
    RandomSource random(trial_seed(m_seed, number));
    nlohmann::json config = nlohmann::json::object();
    const std::size_t n = history.size();
    for (const auto& p : m_space.parameters) {
      if (!m_space.active(p, config))
        continue;
      if (static_cast<int>(n) < m_options.startup_trials) {
        config[p.name] = random_value(p, random);
        continue;
      }
      const auto n_below = static_cast<std::size_t>(
          std::min<double>(std::ceil(m_options.gamma * static_cast<double>(n)), m_options.gamma_cap));
      const auto [below, above] = split(history, n_below);
      const auto values = [&](const std::vector<std::size_t>& group) {
        std::vector<double> out;
        for (auto i : group)
          if (history[i].config.contains(p.name))
            out.push_back(p.internal(history[i].config.at(p.name)));
        return out;
      };
      const auto below_values = values(below), above_values = values(above);
      const ParzenEstimator l(p, below_values, m_parzen), g(p, above_values, m_parzen);
      const auto candidates = l.sample(random, static_cast<std::size_t>(m_options.ei_candidates));
      double best_score = -std::numeric_limits<double>::infinity();
      double best = candidates.front();
      for (double x : candidates) {
        const double score = l.log_pdf(x) - g.log_pdf(x);
        if (score > best_score) {
          best_score = score;
          best = x;
        }
      }
      config[p.name] = p.external(best);
    }
    return config;
  }
  std::string name() const override { return "tpe"; }

private:
  const SearchSpace& m_space;
  TpeOptions m_options;
  ParzenOptions m_parzen;
  std::uint64_t m_seed;
};

} // namespace

std::unique_ptr<Optimizer>
make_tpe(const SearchSpace& space, const TpeOptions& options, std::uint64_t seed) {
  return std::make_unique<TpeSampler>(space, options, seed);
}

} // namespace optkit::tune
