// SLO certification, OptiKit's Algorithm 1: a closed-loop infeasibility gate (one request at a
// time; if the SLOs fail with no queueing at all, no rate can pass), then open-loop trials that
// double the rate while it passes and bisect once one fails, until the gap between the highest
// passing and the lowest failing rate is within the precision, or the trial budget is spent.
//
// Where this departs from the paper's listing, and why: the paper's line 17 halves towards the
// gate's lower bound LB on every failure, which cannot converge on a boundary above 2·LB; here
// a failure bisects between the highest passing rate so far and the failing rate — the
// bracketing-and-midpoint search its text describes — and before any pass between 0 and the
// failing rate: LB is a one-stream estimate, and a server the first trial overloaded (a single
// slot exactly at capacity at LB, or a machine the server saturates) may sustain far less.
// A trial whose generator fell behind while the server also did not keep up is overloaded, a
// failure like any other (trial_summary.hpp); only a generator that lags a server that keeps up
// ends the search as CLIENT_LIMITED.
#pragma once

#include "bench/trial_summary.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace optkit::bench {

// What a runner saw while it waited for the server to drain before an open-loop trial, so that
// no trial's result depends on the one before it.
struct SettleReport {
  bool checked = false;   // false: the runner has nothing to wait for (a simulation)
  bool drained = true;    // nothing in flight and a probe answered within the limit
  double waited_s = 0;    // until then, or until the cap
  int probes = 0;         // probe requests sent
  double probe_e2e_s = 0; // the last probe's latency
  // What the server's /metrics said when the wait began (what the trials before left) and at the
  // trial's start (nullopt: it exports none of the gauges bench knows, or has no /metrics).
  std::optional<double> running_left, waiting_left, running_at_start, waiting_at_start;
};

// What runs a trial: a live endpoint, or a simulated queue in tests.
class TrialRunner {
public:
  virtual ~TrialRunner() = default;
  // Before an open-loop trial: waits, at most `timeout_s`, until the server has nothing of the
  // trials before in flight and a probe request takes at most `probe_limit_s`.
  virtual SettleReport settle(double /*probe_limit_s*/, double /*timeout_s*/) { return {}; }
  virtual TrialRecording closed_loop(std::size_t count, int concurrency) = 0;
  // `rate` requests per second for `count` requests, arrivals drawn with `seed`.
  virtual TrialRecording open_loop(double rate, std::size_t count, std::uint64_t seed) = 0;
};

struct CertifyOptions {
  SummaryOptions summary;  // SLOs, β tolerance, error and lag bounds, warmup/cooldown
  double initial_rate = 0; // 0: start at the gate's LB
  int max_trials = 12;     // open-loop trials
  double precision = 0.05; // stop when (lowest failing − highest passing) ≤ precision × highest passing
  std::size_t gate_requests = 32;
  std::size_t min_requests = 100; // per open-loop trial
  double min_trial_s = 10;        // an open-loop trial lasts at least this (more requests at high rates)
  double max_trial_s = 600;       // and at most this (fewer requests at low rates; flagged)
  int replicates = 1;             // runs of the final boundary rates (a pass needs every run to pass)
  double settle_timeout_s = 60;   // the most an open-loop trial waits for the server to drain first
  std::uint64_t seed = 0;
};

// What a trial was for: the closed-loop gate, a rate of the open-loop search, a replicate of the
// boundary; or, outside a certification (--trace, --rate, --concurrency), that one trial.
enum class TrialPhase { gate, search, replicate, trace, rate, concurrency };
std::string to_string(TrialPhase phase);

struct TrialResult {
  int index = 0; // 0: the gate
  TrialPhase phase = TrialPhase::search;
  double rate = 0; // open-loop target (0 for the gate)
  std::size_t planned_requests = 0;
  bool passed = false;
  bool client_limited = false;
  SettleReport settle; // how the server was found before the trial (open-loop trials)
  TrialSummary summary;
  TrialRecording recording;
};

// noisy: rates passed, but none passed every replicate (the machine's trials vary too much).
enum class CertificationStatus { feasible, infeasible, client_limited, noisy, interrupted };
std::string to_string(CertificationStatus status);

// Why the search stopped, for programs (stop_reason says it for people): "gate_failed",
// "converged", "trial_budget", "client_limited", "interrupted", "single_trial".
enum class StopCode { gate_failed, converged, trial_budget, client_limited, interrupted, single_trial };
std::string to_string(StopCode code);

struct Certification {
  CertificationStatus status = CertificationStatus::infeasible;
  double certified_rate = 0; // the highest passing rate (0 when none)
  double lowest_failing = 0; // 0 when no rate failed
  double lower_bound = 0;    // LB = E[1/latency] from the gate
  std::string binding;       // what failed at the lowest failing rate (or at the gate)
  bool converged = false;
  StopCode stop_code = StopCode::trial_budget;
  std::string stop_reason;
  // Replicates that failed at a rate which had passed (the spread of this machine's trials), for
  // people; empty when every replicate held or none ran.
  std::string replicate_noise;
  std::vector<TrialResult> trials;
};

// `on_trial` sees each trial as it ends (progress lines, archive rows).
Certification certify(TrialRunner& runner, const CertifyOptions& options,
                      const std::function<void(const TrialResult&)>& on_trial = {});

// How many requests an open-loop trial at `rate` runs (tail samples, then duration bounds).
std::size_t trial_requests(const CertifyOptions& options, double rate);

} // namespace optkit::bench
