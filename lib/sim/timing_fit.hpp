// Fitting the simulator's step costs to a live engine's measurements (`optkit tune calibrate-sim`):
// each observed bench trial — the closed-loop gate (one request at a time) or an open-loop trial
// at a rate — is replayed on the simulator with the trial's mean prompt and output lengths and
// its arrival pattern, and step_base, prefill_token and decode_seq are chosen (Nelder–Mead in log
// space) to minimise the squared log-ratios of simulated to measured median TTFT, TPOT and
// end-to-end latency. The fit error is reported per trial and as an RMS of the log-ratios.
#pragma once

#include "sim/serving_simulator.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace optkit::sim {

struct ObservedTrial {
  std::string label;        // "gate", "rate 12.5" ...
  int concurrency = 0;      // > 0: closed loop with this many streams
  double rate = 0;          // open loop: requests per second
  std::size_t requests = 0; // as many as the trial sent (at least 20 are simulated)
  double prompt_tokens = 0, output_tokens = 0;
  double ttft = 0, tpot = 0, e2e = 0; // measured medians, seconds (TPOT 0 when outputs were 1 token)
  bool passed = false;                // the trial held its SLOs (bench's verdict)
};

struct TimingFit {
  SimTiming timing;
  double rms_log_error = 0;                     // over every trial and figure used
  std::vector<std::array<double, 3>> simulated; // per trial: TTFT, TPOT, e2e medians
  int evaluations = 0;
};

// `knobs` are the engine's settings during the trials (max_num_seqs, token budget). Throws
// InputError when no trial carries figures to fit.
TimingFit fit_timing(const std::vector<ObservedTrial>& trials, const SimKnobs& knobs, const SimTiming& start,
                     std::uint64_t seed = 1);

// The medians of a simulated trial (what fit_timing compares).
std::array<double, 3> simulate_trial(const ObservedTrial& trial, const SimTiming& timing, const SimKnobs& knobs,
                                     std::uint64_t seed);

} // namespace optkit::sim
