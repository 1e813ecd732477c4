// One trial's figures from its request records: which requests are measured (warmup and
// cooldown excluded by scheduled time), latency summaries, throughput, goodput and SLO
// attainment, the steady-state regression (OptiKit Eq. 1), the generator's own audit
// (dispatch lag, achieved vs scheduled sends) and each SLO's verdict.
#pragma once

#include "bench/latency_statistics.hpp"
#include "bench/load_generator.hpp"
#include "bench/slo.hpp"

#include <map>
#include <string>
#include <vector>

namespace optkit::bench {

struct SummaryOptions {
  std::vector<SloRule> slos;
  double warmup_fraction = 0.1;      // of the schedule's span, from the start
  double cooldown_fraction = 0.1;    // of the schedule's span, before its end
  double beta_tolerance = 0.02;      // stable iff |β − 1| ≤ this (OptiKit's tight setting)
  double max_dispatch_lag_s = 0.005; // p99 bound before a trial counts as client-limited, or
  double lag_gap_share = 0.1;        // this share of the mean gap between arrivals, when larger
  double send_rate_margin = 0.05;    // sends achieved vs scheduled in the window
  double max_error_rate = 0.01;
  bool open_loop = true;                 // closed-loop trials have no schedule to audit or regress
  std::size_t bootstrap_resamples = 200; // for the tail percentiles' intervals (0: none)
  std::size_t tail_k = 10;               // samples wanted beyond the highest SLO percentile (trial sizing)
  std::uint64_t seed = 0;
};

// Eq. 1: arrival r_i = α + β·c_i (completion), over the measured successful requests. Overload
// spreads completions over more time than arrivals, so it shows as β below 1 in this
// orientation; the test |β − 1| ≤ τ is symmetric.
struct SteadyState {
  double beta = 0, alpha = 0, r = 0;
  std::size_t n = 0;
  bool stable = false;
  double in_flight_slope = 0; // requests in flight per second of trial time (OLS)
  double in_flight_mean = 0;
  // The fitted in-flight count more than doubled over the window: reported, not a verdict (a
  // stable queue near saturation wanders that much within a trial; β decides).
  bool backlog_growing = false;
};

struct SloVerdict {
  SloRule rule;
  double value = -1; // the rule's statistic, seconds (-1: no samples)
  bool passed = false;
};

struct TrialSummary {
  double window_start = 0, window_end = 0; // scheduled-time window measured
  std::size_t requests = 0, measured = 0, succeeded = 0, failed = 0;
  std::size_t cancelled = 0;                 // in the window, abandoned as planned: not measured, not failed
  std::map<std::string, std::size_t> errors; // message → count (measured requests)
  double error_rate = 0;
  double request_throughput = 0;      // successful measured requests / (last end − first end)
  double output_token_throughput = 0; // their output tokens over the same span
  double input_token_throughput = 0;
  double scheduled_rate = 0; // measured requests / window (open loop)
  double goodput = 0;        // requests meeting every SLO, per second
  double slo_attainment = 0; // share of measured requests meeting every SLO
  double mean_input_tokens = 0, mean_output_tokens = 0;
  LatencySummary ttft, tpot, itl, e2e, dispatch_lag, server_queue;
  const LatencySummary& latency(LatencyMetric metric) const; // the summary an SLO metric names
  SteadyState steady;
  double sends_achieved = 1; // sent in window / scheduled in window
  // The generator fell behind its schedule (client_limited_reason says how). That makes the
  // trial client-limited only while the server kept up: completions tracked arrivals (β stable),
  // the SLOs held and errors stayed under the bound. A generator starved because the server
  // saturated the machine is an overloaded trial: it fails like any other (generator_lagged
  // without client_limited).
  bool generator_lagged = false;
  bool client_limited = false;
  std::string client_limited_reason;
  std::vector<SloVerdict> slos;
  bool slos_passed = true;
  std::size_t tail_samples_needed = 0; // for the highest SLO percentile (see trial_requests())
  std::string stopped_early;           // why the generator gave up on the trial (saturation_stop.hpp)
  // The first reason the trial does not certify its rate, empty when it does.
  std::string failure;
};

TrialSummary summarize_trial(const TrialRecording& recording, const SummaryOptions& options);

// Measured requests a trial needs so each SLO percentile q has at least `tail_k` samples beyond
// it: ⌈tail_k / (1 − q/100)⌉ (trial_requests() then allows for warmup and cooldown).
std::size_t tail_samples_needed(const std::vector<SloRule>& slos, std::size_t tail_k);

} // namespace optkit::bench
