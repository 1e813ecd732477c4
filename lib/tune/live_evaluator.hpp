// Trials on a live engine (--engine optkit|vllm|sglang|trtllm|llamacpp): each trial launches the engine
// from its adapter's command line with the trial's knobs (lib/engines), as a child process group
// on a free port, measures it with bench, and stops the group — at the end, on failure and on
// Ctrl-C. What was launched and what the engine reported (argv, /version, /v1/models) is the
// trial's record; its log is kept.
//   certified objective: bench's Algorithm 1 → certified rate / tensor-parallel size (Eq. 2);
//   goodput objective: one closed-loop trial with `concurrency` streams (the knob, or 8) →
//     goodput and p99 end-to-end latency → Eq. 3.
// Failures are outcomes: a configuration the adapter refuses is invalid (never launched); an
// engine that exits or never becomes ready is launch_failed (timed_out past the timeout); one
// that stops answering mid-measurement is crashed.
#pragma once

#include "bench/bench_run.hpp"
#include "engines/engine_adapter.hpp"
#include "tune/objective.hpp"
#include "tune/search_space.hpp"
#include "tune/trial_evaluator.hpp"

#include <memory>

namespace optkit::tune {

struct LiveEvaluatorOptions {
  engines::EngineKind kind = engines::EngineKind::optkit;
  std::string model;
  std::string executable;               // empty: on PATH (optkit: this binary)
  std::vector<std::string> engine_args; // appended to every launch
  double ready_timeout_s = 900;
  ObjectiveOptions objective;
  bench::BenchOptions bench; // profile, SLOs, trial sizes, tokenizer; endpoint and engine are set per trial
  double slo_s = 1.2;        // goodput: the p99 end-to-end target
  std::size_t goodput_requests = 200;
};

// Throws InputError when the space names a knob the engine's adapter does not map (concurrency,
// the client's, is always allowed).
std::unique_ptr<TrialEvaluator> make_live_evaluator(const SearchSpace& space, LiveEvaluatorOptions options);

} // namespace optkit::tune
