// Trials on the discrete-event simulator (--engine sim). Knobs it understands: batching
// (continuous|static), max_num_seqs, max_num_batched_tokens, max_wait_ms, speculative_tokens,
// speculation (on|off), draft_width, concurrency (closed-loop clients instead of the setup's arrivals).
//   goodput objective: one SLO-Tuner segment per trial (Eq. 3 on its p99 and goodput);
//   certified objective: bench's Algorithm 1 run against the simulator in virtual time.
#pragma once

#include "bench/certification.hpp"
#include "sim/sim_config.hpp"
#include "tune/objective.hpp"
#include "tune/search_space.hpp"
#include "tune/trial_evaluator.hpp"

#include <memory>

namespace optkit::tune {

const std::vector<std::string>& sim_knobs();

struct SimEvaluatorOptions {
  sim::SimSetup setup;
  ObjectiveOptions objective;
  bench::CertifyOptions certify; // certified objective: SLOs, trial sizes (virtual seconds)
};

// Throws InputError when the space names a knob the simulator does not have.
std::unique_ptr<TrialEvaluator> make_sim_evaluator(const SearchSpace& space, SimEvaluatorOptions options);

} // namespace optkit::tune
