// `optkit tune calibrate-sim RUN`: fits the simulator's step costs to the trials of an archived
// `optkit bench` run of a live engine (sim/timing_fit), reports the fit error per trial, and
// writes a simulator setup YAML whose workload is the run's (mean lengths, the highest rate that
// held its SLOs) so
// `tune --engine sim --sim FILE` can stand in for that engine.
#pragma once

#include "archive/run_context.hpp"
#include "core/table.hpp"
#include "sim/timing_fit.hpp"

#include <string>

namespace optkit::tune {

struct SimFitOptions {
  std::string run; // a bench run id or "last"
  int max_num_seqs = 256;
  std::int64_t max_num_batched_tokens = 2048; // serve-deltas' defaults
  std::string output;                         // the setup YAML (empty: none written)
  std::string name;                           // the setup's name (default: calibrated-run-N)
  double slo_s = 1.2;
};

struct SimFitResult {
  std::int64_t bench_run = 0;
  std::vector<sim::ObservedTrial> trials;
  sim::TimingFit fit;
  std::string yaml;
};

// InputError when the run is not a bench run or has no usable trials.
SimFitResult fit_simulator(const SimFitOptions& options, const archive::RunContext& context);

Table sim_fit_table(const SimFitResult& result);
nlohmann::json to_json(const SimFitResult& result);

} // namespace optkit::tune
