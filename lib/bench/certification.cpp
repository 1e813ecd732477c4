#include "bench/certification.hpp"

#include "core/interrupt.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace optkit::bench {

std::string
to_string(CertificationStatus status) {
  switch (status) {
  case CertificationStatus::feasible:
    return "FEASIBLE";
  case CertificationStatus::infeasible:
    return "INFEASIBLE";
  case CertificationStatus::client_limited:
    return "CLIENT_LIMITED";
  case CertificationStatus::noisy:
    return "NOISY";
  case CertificationStatus::interrupted:
    return "INTERRUPTED";
  }
  return "?";
}

std::string
to_string(StopCode code) {
  switch (code) {
  case StopCode::gate_failed:
    return "gate_failed";
  case StopCode::converged:
    return "converged";
  case StopCode::trial_budget:
    return "trial_budget";
  case StopCode::client_limited:
    return "client_limited";
  case StopCode::interrupted:
    return "interrupted";
  case StopCode::single_trial:
    return "single_trial";
  }
  return "?";
}

std::size_t
trial_requests(const CertifyOptions& options, double rate) {
  const double measured_share =
      std::max(0.1, 1.0 - options.summary.warmup_fraction - options.summary.cooldown_fraction);
  auto count = static_cast<std::size_t>(std::ceil(
      static_cast<double>(tail_samples_needed(options.summary.slos, options.summary.tail_k)) / measured_share));
  count = std::max(count, options.min_requests);
  count = std::max(count, static_cast<std::size_t>(std::ceil(rate * options.min_trial_s)));
  if (options.max_trial_s > 0)
    count = std::min(count, std::max<std::size_t>(8, static_cast<std::size_t>(std::floor(rate * options.max_trial_s))));
  return count;
}

namespace {

// The next open-loop rate: doubled while every trial passed; bisected between the highest pass
// and the lowest failure once both exist; before any pass, bisected between 0 and the lowest
// failure (the gate's LB is a one-stream estimate, and a machine the first trial overloaded
// may sustain far less).
double
next_rate(bool any_pass, double highest_pass, double lowest_failure, double rate) {
  if (lowest_failure <= 0)
    return 2 * rate;
  return any_pass ? (highest_pass + lowest_failure) / 2 : lowest_failure / 2;
}

} // namespace

Certification
certify(TrialRunner& runner, const CertifyOptions& options, const std::function<void(const TrialResult&)>& on_trial) {
  Certification c;
  const auto record = [&](TrialResult result) -> const TrialResult& {
    result.index = static_cast<int>(c.trials.size());
    c.trials.push_back(std::move(result));
    if (on_trial)
      on_trial(c.trials.back());
    return c.trials.back();
  };

  // Phase 1: the closed-loop gate.
  {
    TrialResult gate;
    gate.phase = "gate";
    gate.planned_requests = options.gate_requests;
    gate.recording = runner.closed_loop(options.gate_requests, 1);
    auto summary_options = options.summary;
    summary_options.open_loop = false;
    summary_options.warmup_fraction = 0;
    summary_options.cooldown_fraction = 0;
    gate.summary = summarize_trial(gate.recording, summary_options);
    gate.passed = gate.summary.failure.empty();
    double inverse = 0;
    std::size_t n = 0;
    for (const auto& r : gate.recording.requests)
      if (r.ok() && r.e2e() > 0) {
        inverse += 1.0 / r.e2e();
        ++n;
      }
    c.lower_bound = n > 0 ? inverse / static_cast<double>(n) : 0.0;
    const auto& done = record(std::move(gate));
    if (done.recording.interrupted || interrupt_requested()) {
      c.status = CertificationStatus::interrupted;
      c.stop_code = StopCode::interrupted;
      c.stop_reason = "interrupted";
      return c;
    }
    if (!done.passed || c.lower_bound <= 0) {
      c.status = CertificationStatus::infeasible;
      c.binding = done.summary.failure.empty() ? "no request succeeded" : done.summary.failure;
      c.stop_code = StopCode::gate_failed;
      c.stop_reason = "the closed-loop gate failed";
      return c;
    }
  }

  // Phase 2: open-loop search.
  double lower = c.lower_bound; // highest rate known to pass (LB before the first pass)
  double upper = 0;             // lowest rate known to fail (0: none yet)
  bool any_pass = false;
  double rate = options.initial_rate > 0 ? options.initial_rate : c.lower_bound;
  // A probe before each trial answers within half again the gate's p95 (one request at a time).
  const double probe_limit = 1.5 * c.trials.front().summary.e2e.p95 + 0.010;
  const auto run_at = [&](double r, const std::string& phase, std::uint64_t seed) -> const TrialResult& {
    TrialResult trial;
    trial.phase = phase;
    trial.rate = r;
    trial.settle = runner.settle(probe_limit, options.settle_timeout_s);
    trial.planned_requests = trial_requests(options, r);
    trial.recording = runner.open_loop(r, trial.planned_requests, seed);
    auto summary_options = options.summary;
    summary_options.seed = seed;
    trial.summary = summarize_trial(trial.recording, summary_options);
    trial.client_limited = trial.summary.client_limited;
    trial.passed = trial.summary.failure.empty();
    return record(std::move(trial));
  };
  int search_trials = 0;
  bool retried_client_limit = false;
  while (search_trials < options.max_trials) {
    const auto& trial = run_at(rate, "search", options.seed + static_cast<std::uint64_t>(search_trials) + 1);
    ++search_trials;
    if (trial.recording.interrupted || interrupt_requested()) {
      c.status = CertificationStatus::interrupted;
      c.stop_code = StopCode::interrupted;
      c.stop_reason = "interrupted";
      break;
    }
    if (trial.client_limited && !retried_client_limit) {
      // One rerun first: an OS hiccup on a shared machine delays a few sends once; a generator
      // that cannot hold the rate fails again.
      retried_client_limit = true;
      continue;
    }
    if (trial.client_limited) {
      c.status = CertificationStatus::client_limited;
      c.stop_code = StopCode::client_limited;
      c.stop_reason = fmt::format("the load generator could not hold {:.3g} req/s ({}); rates above {:.3g} req/s "
                                  "were not tested",
                                  rate, trial.summary.client_limited_reason, any_pass ? lower : 0.0);
      break;
    }
    if (trial.passed) {
      any_pass = true;
      lower = rate;
      c.certified_rate = std::max(c.certified_rate, rate);
    } else {
      upper = rate;
      c.lowest_failing = rate;
      c.binding = trial.summary.failure;
    }
    if (any_pass && upper > 0 && upper - lower <= options.precision * lower) {
      c.converged = true;
      break;
    }
    rate = next_rate(any_pass, lower, upper, rate);
  }
  if (c.status == CertificationStatus::interrupted)
    return c;

  // Replicates: the boundary pass must hold every time; a failing replicate moves the
  // certificate down to the next highest rate that passed every run. A search that ended
  // CLIENT_LIMITED still replicates the rate it reports as passing.
  if (options.replicates > 1 && any_pass) {
    std::vector<double> failed_at; // a rate that passed once and then failed: the machine's noise
    for (int k = 1; k < options.replicates && c.certified_rate > 0; ++k) {
      const auto& again = run_at(c.certified_rate, "replicate", options.seed + 1000 + static_cast<std::uint64_t>(k));
      if (again.recording.interrupted || interrupt_requested()) {
        c.status = CertificationStatus::interrupted;
        c.stop_code = StopCode::interrupted;
        c.stop_reason = "interrupted";
        return c;
      }
      if (!again.passed) {
        failed_at.push_back(c.certified_rate);
        c.lowest_failing = c.certified_rate;
        c.binding = again.summary.failure;
        double next = 0;
        for (const auto& t : c.trials)
          if (t.phase == "search" && t.passed && t.rate < c.certified_rate)
            next = std::max(next, t.rate);
        c.certified_rate = next;
        c.converged = false;
        k = 0; // the new boundary gets its own replicates
      }
    }
    if (!failed_at.empty())
      c.replicate_noise = fmt::format(
          "a replicate failed at {:.4g} req/s after passing there ({} such rate{}): the trials on this machine vary "
          "more than a certificate allows, so {}",
          fmt::join(failed_at, ", "), failed_at.size(), failed_at.size() == 1 ? "" : "s",
          c.certified_rate > 0 ? fmt::format("the certificate moved down to {:.4g} req/s, which passed every replicate",
                                             c.certified_rate)
                               : std::string("no rate passed every replicate"));
  }

  if (c.status != CertificationStatus::client_limited) {
    c.status = c.certified_rate > 0         ? CertificationStatus::feasible
               : !c.replicate_noise.empty() ? CertificationStatus::noisy
                                            : CertificationStatus::infeasible;
    if (c.stop_reason.empty())
      c.stop_code = c.converged ? StopCode::converged : StopCode::trial_budget;
    if (c.stop_reason.empty())
      c.stop_reason = c.converged ? fmt::format("converged: the passing and failing rates are within {:.0f} %",
                                                options.precision * 100)
                                  : fmt::format("trial budget of {} open-loop trials spent", options.max_trials);
    if (c.status == CertificationStatus::infeasible && c.binding.empty())
      c.binding = "no open-loop rate passed";
  }
  if (!c.replicate_noise.empty())
    c.stop_reason += "; " + c.replicate_noise;
  return c;
}

} // namespace optkit::bench
