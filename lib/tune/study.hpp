// A tuning study (OptiKit Algorithm 2 lines 23–30; SLO-Tuner Algorithm 1): an optional baseline
// trial at the engine's defaults, then trials the optimizer proposes, each checked against the
// space and the engine's rules before it runs (an invalid one is recorded as infeasible without
// launching), measured, and fed back; then the top-k feasible configurations are re-measured
// with fresh seeds (noise: TUNA found most "best" configurations degrade when redeployed) and
// the winner is the one with the best median over all its measurements, among those that met
// the SLO every time. Trials resumed from an earlier run are taken as measured, not re-run.
#pragma once

#include "tune/optimizer.hpp"
#include "tune/trial_evaluator.hpp"
#include "tune/trial_executor.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace optkit::tune {

struct StudyOptions {
  int trials = 30;      // baseline and search trials
  int top_k = 3;        // configurations re-measured at the end
  int replicates = 2;   // re-measurements of each
  bool baseline = true; // trial 0 at the space's defaults (when every knob has one)
  std::uint64_t seed = 0;
  // Configurations measured first, right after the baseline (Optuna's enqueue_trial): e.g. the
  // simulator's best ones (--prior sim).
  std::vector<nlohmann::json> enqueued;
};

struct StudyTrial {
  int number = 0; // search trials 0..trials-1; replicates continue the numbering
  StudyPhase phase = StudyPhase::search;
  nlohmann::json config;
  TrialOutcome outcome;
  std::uint64_t seed = 0;
  bool resumed = false; // taken from the earlier run, not measured now
};

struct StudyResult {
  std::vector<StudyTrial> trials;
  bool interrupted = false;
  std::optional<nlohmann::json> best;    // the winner (none when no configuration met the SLO)
  double best_median = 0;                // its median value over every measurement
  std::vector<double> best_values;       // those measurements
  std::optional<double> baseline_median; // the baseline's, when it ran and met the SLO
  std::string stop_reason;
};

// Trials run on `executor` (up to its slots at once; with one slot the study is deterministic in
// its seed). `evaluator` checks each configuration against the engine's rules before it is
// submitted. `previous` are completed trials of an interrupted run of the same study (same space,
// optimizer, seed): they are reported to `on_trial` again as resumed, and not re-run.
// `should_stop` is polled while trials run (Ctrl-C): running trials are cancelled.
StudyResult run_study(const SearchSpace& space, Optimizer& optimizer, const TrialEvaluator& evaluator,
                      TrialExecutor& executor, const StudyOptions& options, const std::vector<StudyTrial>& previous,
                      const std::function<void(const StudyTrial&)>& on_trial,
                      const std::function<bool()>& should_stop = {});

} // namespace optkit::tune
