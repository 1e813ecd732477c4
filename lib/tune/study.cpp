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

// One study's state: what was resumed, what was measured, and the executor's trials in flight.
// run() is the study's three phases: search, re-measure the finalists, pick the winner.
class StudyLoop {
public:
  StudyLoop(const SearchSpace& space, Optimizer& optimizer, const TrialEvaluator& evaluator, TrialExecutor& executor,
            const StudyOptions& options, const std::vector<StudyTrial>& previous,
            const std::function<void(const StudyTrial&)>& on_trial, const std::function<bool()>& should_stop)
      : m_space(space)
      , m_optimizer(optimizer)
      , m_evaluator(evaluator)
      , m_executor(executor)
      , m_options(options)
      , m_on_trial(on_trial)
      , m_should_stop(should_stop)
      , m_defaults(space.defaults())
      , m_baseline(options.baseline && m_defaults && optimizer.name() != "hillclimb") {
    for (const auto& t : previous)
      m_done[{t.phase, t.number}] = &t;
  }

  StudyResult run() {
    if (!search() || !replicate(finalists()))
      return interrupted();
    sort_by_number();
    pick_winner();
    return std::move(m_result);
  }

private:
  bool stopping() const { return m_should_stop && m_should_stop(); }
  bool has_free_slot() const { return m_executor.in_flight() < static_cast<std::size_t>(m_executor.slots()); }

  void record(StudyTrial t) {
    m_result.trials.push_back(std::move(t));
    const auto& r = m_result.trials.back();
    m_measurements[r.config.dump()].push_back(r);
    if (r.phase != StudyPhase::replicate) {
      const auto at =
          std::find_if(m_history.begin(), m_history.end(), [&](const Observation& o) { return o.number > r.number; });
      m_history.insert(at, observation(r));
    }
    if (m_on_trial)
      m_on_trial(r);
  }

  // Why `config` cannot run (empty: it can): outside the space or against the engine's rules.
  std::string invalid_reason(const nlohmann::json& config) const {
    try {
      m_space.check(config);
      return m_evaluator.invalid_reason(config);
    } catch (const std::exception& e) {
      return e.what();
    }
  }

  // Resumed, invalid or submitted: `job` leaves here handled one way or the other.
  void dispatch(const TrialJob& job) {
    if (const auto it = m_done.find({job.phase, job.number}); it != m_done.end()) {
      StudyTrial t = *it->second;
      t.resumed = true;
      record(std::move(t));
      return;
    }
    const auto why = invalid_reason(job.config);
    if (why.empty()) {
      m_executor.submit(job);
      return;
    }
    StudyTrial t{job.number, job.phase, job.config, {}, job.seed, false};
    t.outcome.status = TrialStatus::invalid;
    t.outcome.error = why;
    t.outcome.violation = 10;
    record(std::move(t));
  }

  // False when Ctrl-C arrived while waiting.
  bool collect() {
    auto got = m_executor.wait_one();
    if (!got)
      return false;
    record(StudyTrial{got->first.number, got->first.phase, got->first.config, std::move(got->second), got->first.seed,
                      false});
    return true;
  }

  StudyResult interrupted() {
    m_executor.cancel_all();
    m_result.interrupted = true;
    m_result.stop_reason = "interrupted";
    sort_by_number();
    return std::move(m_result);
  }

  void sort_by_number() {
    std::stable_sort(m_result.trials.begin(), m_result.trials.end(),
                     [](const StudyTrial& a, const StudyTrial& b) { return a.number < b.number; });
  }

  // Search trial `number`'s configuration: resumed, the defaults (baseline), enqueued or proposed;
  // none when the optimizer has nothing left. `waiting`: the optimizer waits for running trials.
  std::optional<nlohmann::json> next_search_config(int number, StudyPhase phase, bool& waiting) {
    if (const auto it = m_done.find({phase, number}); it != m_done.end())
      return it->second->config;
    if (phase == StudyPhase::baseline)
      return m_defaults;
    if (const int first = m_baseline ? 1 : 0; number - first < static_cast<int>(m_options.enqueued.size()))
      return m_options.enqueued[static_cast<std::size_t>(number - first)];
    if (!m_optimizer.ready(m_history, number)) {
      waiting = true;
      return std::nullopt;
    }
    return m_optimizer.propose(m_history, number);
  }

  // Every trial sees the same workload (common random numbers), so differences are the
  // configurations', not the arrivals'. False when interrupted.
  bool search() {
    int number = 0;
    bool exhausted = false;
    while (true) {
      bool waiting = false;
      if (stopping())
        return false;
      while (!exhausted && number < m_options.trials && has_free_slot()) {
        const StudyPhase phase = m_baseline && number == 0 ? StudyPhase::baseline : StudyPhase::search;
        const auto config = next_search_config(number, phase, waiting);
        if (waiting)
          break; // a hill-climb step waits for its running trials
        if (!config) {
          exhausted = true;
          m_result.stop_reason = m_optimizer.name() + " has no configuration left to try";
          break;
        }
        dispatch({number++, phase, *config, m_options.seed});
      }
      if (m_executor.in_flight() == 0) {
        if (exhausted || number >= m_options.trials)
          break;
        if (waiting)
          throw std::logic_error(m_optimizer.name() + " waits for trials that are not running");
        continue; // everything dispatched so far was resumed or invalid
      }
      if (!collect())
        return false;
    }
    if (m_result.stop_reason.empty())
      m_result.stop_reason = std::to_string(number) + " trials";
    return true;
  }

  // The top-k distinct feasible configurations, best first (at least the best one competes for the
  // win), and how many of them are re-measured (top_k; 0: none). The defaults are re-measured as
  // often as the finalists, so "beats the defaults" compares medians of equally many measurements;
  // they compete for the win too (a tuner that cannot beat them says so).
  std::pair<std::vector<nlohmann::json>, std::size_t> finalists_and_count() const {
    std::vector<const StudyTrial*> ranked;
    for (const auto& t : m_result.trials)
      if (t.outcome.feasible() &&
          std::none_of(ranked.begin(), ranked.end(), [&](const StudyTrial* r) { return r->config == t.config; }))
        ranked.push_back(&t);
    std::stable_sort(ranked.begin(), ranked.end(), [](const StudyTrial* a, const StudyTrial* b) {
      return a->outcome.value > b->outcome.value || (a->outcome.value == b->outcome.value && a->number < b->number);
    });
    if (ranked.size() > static_cast<std::size_t>(std::max(1, m_options.top_k)))
      ranked.resize(static_cast<std::size_t>(std::max(1, m_options.top_k)));
    std::vector<nlohmann::json> finalists;
    for (const auto* t : ranked)
      finalists.push_back(t->config);
    std::size_t remeasured = std::min(finalists.size(), static_cast<std::size_t>(std::max(0, m_options.top_k)));
    const bool baseline_feasible =
        m_baseline && std::any_of(m_result.trials.begin(), m_result.trials.end(), [](const StudyTrial& t) {
          return t.phase == StudyPhase::baseline && t.outcome.feasible();
        });
    const auto end = finalists.begin() + static_cast<std::ptrdiff_t>(remeasured);
    if (baseline_feasible && remeasured > 0 && std::find(finalists.begin(), end, *m_defaults) == end) {
      finalists.insert(end, *m_defaults);
      ++remeasured;
    }
    return {finalists, remeasured};
  }

  std::vector<TrialJob> finalists() {
    auto [finalists, remeasured] = finalists_and_count();
    m_finalists = std::move(finalists);
    std::vector<TrialJob> replicates;
    int number = m_options.trials;
    for (std::size_t f = 0; f < remeasured; ++f)
      for (int r = 1; r <= m_options.replicates; ++r, ++number)
        replicates.push_back(
            {number, StudyPhase::replicate, m_finalists[f], trial_seed(m_options.seed ^ 0x5eedULL, number)});
    return replicates;
  }

  // Re-measures with fresh seeds. False when interrupted.
  bool replicate(const std::vector<TrialJob>& replicates) {
    std::size_t next = 0;
    while (next < replicates.size() || m_executor.in_flight() > 0) {
      if (stopping())
        return false;
      while (next < replicates.size() && has_free_slot())
        dispatch(replicates[next++]);
      if (m_executor.in_flight() > 0 && !collect())
        return false;
    }
    return true;
  }

  // The median value over every measurement of `config`, and those values; none unless every
  // measurement met the SLO.
  std::optional<std::pair<double, std::vector<double>>> median_of(const nlohmann::json& config) {
    const auto& all = m_measurements[config.dump()];
    if (all.empty() || !std::all_of(all.begin(), all.end(), [](const StudyTrial& t) { return t.outcome.feasible(); }))
      return std::nullopt;
    std::vector<double> values;
    for (const auto& t : all)
      values.push_back(t.outcome.value);
    return std::make_pair(median(values), values);
  }

  // The winner: feasible in every measurement, best median. The defaults' figure: every
  // measurement of that configuration (hill-climb starts there).
  void pick_winner() {
    for (const auto& config : m_finalists)
      if (const auto m = median_of(config); m && (!m_result.best || m->first > m_result.best_median)) {
        m_result.best = config;
        m_result.best_median = m->first;
        m_result.best_values = m->second;
      }
    if (m_defaults)
      if (const auto m = median_of(*m_defaults))
        m_result.baseline_median = m->first;
  }

  const SearchSpace& m_space;
  Optimizer& m_optimizer;
  const TrialEvaluator& m_evaluator;
  TrialExecutor& m_executor;
  const StudyOptions& m_options;
  const std::function<void(const StudyTrial&)>& m_on_trial;
  const std::function<bool()>& m_should_stop;
  const std::optional<nlohmann::json> m_defaults;
  const bool m_baseline;                                          // trial 0 at the defaults
  std::map<std::pair<StudyPhase, int>, const StudyTrial*> m_done; // (phase, number) → resumed trial
  std::vector<Observation> m_history;                             // search trials seen, by number
  std::map<std::string, std::vector<StudyTrial>> m_measurements;  // config → every measurement
  std::vector<nlohmann::json> m_finalists;
  StudyResult m_result;
};

} // namespace

StudyResult
run_study(const SearchSpace& space, Optimizer& optimizer, const TrialEvaluator& evaluator, TrialExecutor& executor,
          const StudyOptions& options, const std::vector<StudyTrial>& previous,
          const std::function<void(const StudyTrial&)>& on_trial, const std::function<bool()>& should_stop) {
  return StudyLoop(space, optimizer, evaluator, executor, options, previous, on_trial, should_stop).run();
}

} // namespace optkit::tune
