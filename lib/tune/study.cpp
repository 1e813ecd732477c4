#include "tune/study.hpp"

#include "core/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

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
run_study(const SearchSpace& space, Optimizer& optimizer, const TrialEvaluator& evaluator, TrialExecutor& executor,
          const StudyOptions& options, const std::vector<StudyTrial>& previous,
          const std::function<void(const StudyTrial&)>& on_trial, const std::function<bool()>& should_stop) {
  StudyResult result;
  std::map<std::pair<std::string, int>, const StudyTrial*> done; // (phase, number) → resumed trial
  for (const auto& t : previous)
    done[{t.phase, t.number}] = &t;
  const auto stopping = [&] { return should_stop && should_stop(); };
  std::vector<Observation> history;                            // search trials seen, by number
  std::map<std::string, std::vector<StudyTrial>> measurements; // config → every measurement

  const auto record = [&](StudyTrial t) {
    result.trials.push_back(std::move(t));
    const auto& r = result.trials.back();
    measurements[r.config.dump()].push_back(r);
    if (r.phase != "replicate") {
      const auto at =
          std::find_if(history.begin(), history.end(), [&](const Observation& o) { return o.number > r.number; });
      history.insert(at, observation(r));
    }
    if (on_trial)
      on_trial(r);
  };
  // Resumed, invalid or submitted: `job` leaves this function handled one way or the other.
  const auto dispatch = [&](const TrialJob& job) {
    if (const auto it = done.find({job.phase, job.number}); it != done.end()) {
      StudyTrial t = *it->second;
      t.resumed = true;
      record(std::move(t));
      return;
    }
    std::string why;
    try {
      space.check(job.config);
      why = evaluator.invalid_reason(job.config);
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (why.empty()) {
      executor.submit(job);
      return;
    }
    StudyTrial t{job.number, job.phase, job.config, {}, job.seed, false};
    t.outcome.status = TrialStatus::invalid;
    t.outcome.error = why;
    t.outcome.violation = 10;
    record(std::move(t));
  };
  // False when Ctrl-C arrived while waiting.
  const auto collect = [&] {
    auto got = executor.wait_one();
    if (!got)
      return false;
    record(StudyTrial{got->first.number, got->first.phase, got->first.config, std::move(got->second), got->first.seed,
                      false});
    return true;
  };
  const auto interrupted = [&] {
    executor.cancel_all();
    result.interrupted = true;
    result.stop_reason = "interrupted";
    std::stable_sort(result.trials.begin(), result.trials.end(),
                     [](const StudyTrial& a, const StudyTrial& b) { return a.number < b.number; });
    return result;
  };

  // Search. Every trial sees the same workload (common random numbers), so differences are the
  // configurations', not the arrivals'.
  const auto defaults = space.defaults();
  const bool baseline = options.baseline && defaults && optimizer.name() != "hillclimb";
  int number = 0;
  bool exhausted = false;
  while (true) {
    bool waiting = false;
    if (stopping())
      return interrupted();
    while (!exhausted && number < options.trials && executor.in_flight() < static_cast<std::size_t>(executor.slots())) {
      const bool is_baseline = baseline && number == 0;
      const std::string phase = is_baseline ? "baseline" : "search";
      std::optional<nlohmann::json> config;
      if (const auto it = done.find({phase, number}); it != done.end())
        config = it->second->config;
      else if (is_baseline)
        config = defaults;
      else if (const int first = baseline ? 1 : 0; number - first < static_cast<int>(options.enqueued.size()))
        config = options.enqueued[static_cast<std::size_t>(number - first)];
      else if (!optimizer.ready(history, number)) {
        waiting = true;
        break; // a hill-climb step waits for its running trials
      } else
        config = optimizer.propose(history, number);
      if (!config) {
        exhausted = true;
        result.stop_reason = optimizer.name() + " has no configuration left to try";
        break;
      }
      dispatch({number++, phase, *config, options.seed});
    }
    if (executor.in_flight() == 0) {
      if (exhausted || number >= options.trials)
        break;
      if (waiting)
        throw std::logic_error(optimizer.name() + " waits for trials that are not running");
      continue; // everything dispatched so far was resumed or invalid
    }
    if (!collect())
      return interrupted();
  }
  if (result.stop_reason.empty())
    result.stop_reason = std::to_string(number) + " trials";

  // Re-measure the top-k distinct feasible configurations.
  std::vector<const StudyTrial*> ranked;
  for (const auto& t : result.trials)
    if (t.outcome.feasible() &&
        std::none_of(ranked.begin(), ranked.end(), [&](const StudyTrial* r) { return r->config == t.config; }))
      ranked.push_back(&t);
  std::stable_sort(ranked.begin(), ranked.end(), [](const StudyTrial* a, const StudyTrial* b) {
    return a->outcome.value > b->outcome.value || (a->outcome.value == b->outcome.value && a->number < b->number);
  });
  // At least the best one competes for the win; top_k of them are re-measured (0: none).
  if (ranked.size() > static_cast<std::size_t>(std::max(1, options.top_k)))
    ranked.resize(static_cast<std::size_t>(std::max(1, options.top_k)));
  std::vector<nlohmann::json> finalists;
  for (const auto* t : ranked)
    finalists.push_back(t->config);
  std::size_t remeasured = std::min(finalists.size(), static_cast<std::size_t>(std::max(0, options.top_k)));
  // The defaults are re-measured as often as the finalists, so "beats the defaults" compares
  // medians of equally many measurements; they compete for the win too (a tuner that cannot
  // beat them says so).
  const bool baseline_feasible =
      baseline && std::any_of(result.trials.begin(), result.trials.end(),
                              [](const StudyTrial& t) { return t.phase == "baseline" && t.outcome.feasible(); });
  if (baseline_feasible && remeasured > 0 &&
      std::find(finalists.begin(), finalists.begin() + static_cast<std::ptrdiff_t>(remeasured), *defaults) ==
          finalists.begin() + static_cast<std::ptrdiff_t>(remeasured)) {
    finalists.insert(finalists.begin() + static_cast<std::ptrdiff_t>(remeasured), *defaults);
    ++remeasured;
  }
  std::vector<TrialJob> replicates;
  int replicate_number = options.trials;
  for (std::size_t f = 0; f < remeasured; ++f)
    for (int r = 1; r <= options.replicates; ++r) {
      const auto& config = finalists[f];
      replicates.push_back(
          {replicate_number, "replicate", config, trial_seed(options.seed ^ 0x5eedULL, replicate_number)});
      ++replicate_number;
    }
  std::size_t next = 0;
  while (next < replicates.size() || executor.in_flight() > 0) {
    if (stopping())
      return interrupted();
    while (next < replicates.size() && executor.in_flight() < static_cast<std::size_t>(executor.slots()))
      dispatch(replicates[next++]);
    if (executor.in_flight() > 0 && !collect())
      return interrupted();
  }
  std::stable_sort(result.trials.begin(), result.trials.end(),
                   [](const StudyTrial& a, const StudyTrial& b) { return a.number < b.number; });

  // The winner: feasible in every measurement, best median.
  const auto median_of = [&](const nlohmann::json& config) -> std::optional<std::pair<double, std::vector<double>>> {
    const auto& all = measurements[config.dump()];
    if (all.empty() || !std::all_of(all.begin(), all.end(), [](const StudyTrial& t) { return t.outcome.feasible(); }))
      return std::nullopt;
    std::vector<double> values;
    for (const auto& t : all)
      values.push_back(t.outcome.value);
    return std::make_pair(median(values), values);
  };
  for (const auto& config : finalists)
    if (const auto m = median_of(config); m && (!result.best || m->first > result.best_median)) {
      result.best = config;
      result.best_median = m->first;
      result.best_values = m->second;
    }
  // The defaults' figure: every measurement of that configuration (hill-climb starts there).
  if (defaults)
    if (const auto m = median_of(*defaults))
      result.baseline_median = m->first;
  return result;
}

} // namespace optkit::tune
