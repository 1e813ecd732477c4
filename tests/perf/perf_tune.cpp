// The tuner's sample efficiency on the simulator, against an optimum known by exhaustive grid:
//   perf_tune [SPACE] [SETUP] [SEEDS]
// Every configuration of SPACE (default slo-tuner) is measured once on SETUP (default
// tinyllama-l40s) with one fixed workload, giving the objective's full table and its optimum.
// Then TPE, random search and SLO-Tuner's hill-climb run against that table for SEEDS seeds
// (default 20): trials until a feasible configuration within 5 % of the optimum is found
// (capped at 400), and the share of seeds that get there within 30 trials.
// Goals (issue): TPE within 5 % in ≤ 30 trials in ≥ 80 % of seeds; ≥ 2× fewer trials than random
// (median).
#include "sim/sim_config.hpp"
#include "tune/optimizer.hpp"
#include "tune/sim_evaluator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

using namespace optkit;
using namespace optkit::tune;

namespace {

struct Table {
  std::map<std::string, TrialOutcome> outcomes;
  double optimum = -1e300;
  std::string optimum_config;
};

void
enumerate(const SearchSpace& space, std::size_t index, nlohmann::json config, std::vector<nlohmann::json>& out) {
  if (index == space.parameters.size()) {
    out.push_back(config);
    return;
  }
  const auto& p = space.parameters[index];
  if (!space.active(p, config)) {
    enumerate(space, index + 1, config, out);
    return;
  }
  for (const auto& v : p.grid(5)) {
    auto next = config;
    next[p.name] = v;
    enumerate(space, index + 1, next, out);
  }
}

int
trials_to_target(Optimizer& optimizer, const Table& table, double target, int cap) {
  std::vector<Observation> history;
  for (int n = 0; n < cap; ++n) {
    const auto c = optimizer.propose(history, n);
    if (!c)
      return cap;
    const auto& o = table.outcomes.at(c->dump());
    if (o.feasible() && o.value >= target)
      return n + 1;
    history.push_back({n, *c, o.value, o.status == TrialStatus::measured ? o.violation : 10.0});
  }
  return cap;
}

double
median(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

} // namespace

int
main(int argc, char** argv) {
  const SearchSpace space = resolve_search_space(argc > 1 ? argv[1] : "slo-tuner");
  SimEvaluatorOptions options;
  options.setup = sim::resolve_sim_setup(argc > 2 ? argv[2] : "tinyllama-l40s");
  const int seeds = argc > 3 ? std::atoi(argv[3]) : 20;
  auto evaluator = make_sim_evaluator(space, options);

  std::vector<nlohmann::json> configs;
  enumerate(space, 0, nlohmann::json::object(), configs);
  Table table;
  const auto start = std::chrono::steady_clock::now();
  for (const auto& c : configs) {
    TrialOutcome o = evaluator->invalid_reason(c).empty() ? evaluator->evaluate(c, 0, {}) : TrialOutcome{};
    if (!evaluator->invalid_reason(c).empty()) {
      o.status = TrialStatus::invalid;
      o.violation = 10;
    }
    if (o.feasible() && o.value > table.optimum) {
      table.optimum = o.value;
      table.optimum_config = c.dump();
    }
    table.outcomes[c.dump()] = o;
  }
  const double grid_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double target = table.optimum > 0 ? 0.95 * table.optimum : table.optimum * 1.05;
  std::size_t feasible = 0;
  for (const auto& [k, o] : table.outcomes)
    feasible += o.feasible() ? 1u : 0u;
  std::size_t hits = 0;
  for (const auto& [k, o] : table.outcomes)
    hits += o.feasible() && o.value >= target ? 1u : 0u;
  std::printf("space %s on sim %s: %zu configurations (%zu feasible, %zu within 5 %% of the optimum), grid measured "
              "in %.1f s\noptimum %.4f at %s\n\n",
              space.name.c_str(), options.setup.name.c_str(), configs.size(), feasible, hits, grid_s, table.optimum,
              table.optimum_config.c_str());

  constexpr int cap = 400;
  std::map<std::string, std::vector<int>> results;
  for (int seed = 1; seed <= seeds; ++seed) {
    const auto s = static_cast<std::uint64_t>(seed);
    auto tpe = make_tpe(space, TpeOptions{}, s);
    auto random = make_random_search(space, s);
    results["tpe"].push_back(trials_to_target(*tpe, table, target, cap));
    results["random"].push_back(trials_to_target(*random, table, target, cap));
  }
  auto climb = make_hill_climb(space, HillClimbOptions{});
  results["hillclimb (deterministic)"].push_back(trials_to_target(*climb, table, target, cap));
  std::printf("%-26s %16s %22s   trials to target per seed\n", "optimizer", "median trials", "within 30 trials");
  for (const auto& [name, v] : results) {
    const auto within = std::count_if(v.begin(), v.end(), [](int t) { return t <= 30; });
    std::string list;
    for (int t : v)
      list += (t >= cap ? fmt::format("{}+", cap) : std::to_string(t)) + " ";
    std::printf("%-26s %16.1f %15ld / %-5zu   %s\n", name.c_str(), median(v), within, v.size(), list.c_str());
  }
  const double ratio = median(results["random"]) / median(results["tpe"]);
  std::printf(
      "\nrandom ÷ TPE median trials: %.2f× (goal ≥ 2×); TPE within 30 trials: %.0f %% of seeds (goal ≥ 80 %%)\n", ratio,
      100.0 *
          static_cast<double>(
              std::count_if(results["tpe"].begin(), results["tpe"].end(), [](int t) { return t <= 30; })) /
          seeds);
  return 0;
}
