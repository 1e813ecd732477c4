#include "tune/study.hpp"

#include "core/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace optkit::tune {

namespace {

Observation
observation(const StudyTrial& t) {
  return {t.number, t.config, t.outcome.value, t.outcome.status == TrialStatus::measured ? t.outcome.violation : 10.0};
}

double
median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return percentile_of_sorted(values, 50);
}

} // namespace

StudyResult
run_study(const SearchSpace& space, Optimizer& optimizer, TrialEvaluator& evaluator, const StudyOptions& options,
          const std::vector<StudyTrial>& previous, const std::function<void(const StudyTrial&)>& on_trial,
          const std::function<bool()>& should_stop) {
  StudyResult result;
  std::map<std::pair<std::string, int>, const StudyTrial*> done; // (phase, number) → resumed trial
  for (const auto& t : previous)
    done[{t.phase, t.number}] = &t;
  const auto stopping = [&] { return should_stop && should_stop(); };

  const auto run = [&](int number, const std::string& phase, const nlohmann::json& config, std::uint64_t seed) {
    if (const auto it = done.find({phase, number}); it != done.end()) {
      StudyTrial t = *it->second;
      t.resumed = true;
      result.trials.push_back(t);
    } else {
      StudyTrial t;
      t.number = number;
      t.phase = phase;
      t.config = config;
      t.seed = seed;
      std::string why;
      try {
        space.check(config);
        why = evaluator.invalid_reason(config);
      } catch (const std::exception& e) {
        why = e.what();
      }
      if (!why.empty()) {
        t.outcome.status = TrialStatus::invalid;
        t.outcome.error = why;
        t.outcome.violation = 10;
      } else {
        t.outcome = evaluator.evaluate(config, seed, options.directory / ("trial-" + std::to_string(number)));
      }
      result.trials.push_back(std::move(t));
    }
    if (on_trial)
      on_trial(result.trials.back());
    return result.trials.back();
  };

  // Search: every trial sees the same workload (common random numbers), so differences are the
  // configurations', not the arrivals'.
  std::vector<Observation> history;
  const auto defaults = space.defaults();
  const bool baseline = options.baseline && defaults && optimizer.name() != "hillclimb";
  for (int number = 0; number < options.trials; ++number) {
    if (stopping()) {
      result.interrupted = true;
      result.stop_reason = "interrupted";
      return result;
    }
    const bool is_baseline = baseline && number == 0;
    std::optional<nlohmann::json> config;
    if (const auto it = done.find({is_baseline ? "baseline" : "search", number}); it != done.end())
      config = it->second->config;
    else
      config = is_baseline ? defaults : optimizer.propose(history, number);
    if (!config) {
      result.stop_reason = optimizer.name() + " has no configuration left to try";
      break;
    }
    history.push_back(observation(run(number, is_baseline ? "baseline" : "search", *config, options.seed)));
  }
  if (result.stop_reason.empty())
    result.stop_reason = std::to_string(result.trials.size()) + " trials";

  // Re-measure the top-k distinct feasible configurations.
  std::vector<const StudyTrial*> ranked;
  for (const auto& t : result.trials)
    if (t.outcome.feasible() &&
        std::none_of(ranked.begin(), ranked.end(), [&](const StudyTrial* r) { return r->config == t.config; }))
      ranked.push_back(&t);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const StudyTrial* a, const StudyTrial* b) { return a->outcome.value > b->outcome.value; });
  if (ranked.size() > static_cast<std::size_t>(options.top_k))
    ranked.resize(static_cast<std::size_t>(options.top_k));
  std::vector<nlohmann::json> finalists;
  for (const auto* t : ranked)
    finalists.push_back(t->config);
  int number = options.trials;
  std::map<std::string, std::vector<StudyTrial>> measurements; // config → every measurement
  for (const auto& t : result.trials)
    measurements[t.config.dump()].push_back(t);
  for (const auto& config : finalists)
    for (int r = 1; r <= options.replicates; ++r) {
      if (stopping()) {
        result.interrupted = true;
        result.stop_reason = "interrupted";
        return result;
      }
      const std::uint64_t seed = trial_seed(options.seed ^ 0x5eedULL, number);
      measurements[config.dump()].push_back(run(number++, "replicate", config, seed));
    }

  // The winner: feasible in every measurement, best median.
  for (const auto& config : finalists) {
    const auto& all = measurements[config.dump()];
    if (!std::all_of(all.begin(), all.end(), [](const StudyTrial& t) { return t.outcome.feasible(); }))
      continue;
    std::vector<double> values;
    for (const auto& t : all)
      values.push_back(t.outcome.value);
    const double m = median(values);
    if (!result.best || m > result.best_median) {
      result.best = config;
      result.best_median = m;
      result.best_values = values;
    }
  }
  // The defaults' figure: every measurement of that configuration (hill-climb starts there).
  if (defaults) {
    const auto& all = measurements[defaults->dump()];
    if (!all.empty() && std::all_of(all.begin(), all.end(), [](const StudyTrial& t) { return t.outcome.feasible(); })) {
      std::vector<double> values;
      for (const auto& t : all)
        values.push_back(t.outcome.value);
      result.baseline_median = median(values);
    }
  }
  return result;
}

} // namespace optkit::tune
