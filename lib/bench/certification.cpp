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
to_string(TrialPhase phase) {
  switch (phase) {
  case TrialPhase::gate:
    return "gate";
  case TrialPhase::search:
    return "search";
  case TrialPhase::replicate:
    return "replicate";
  case TrialPhase::trace:
    return "trace";
  case TrialPhase::rate:
    return "rate";
  case TrialPhase::concurrency:
    return "concurrency";
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

// One certification's state and its phases: the gate, the open-loop search, the replicates of
// the boundary and the verdict. Each phase returns false when the run must end there.
class Certifier {
public:
  Certifier(TrialRunner& runner, const CertifyOptions& options, const std::function<void(const TrialResult&)>& on_trial)
      : m_runner(runner), m_options(options), m_on_trial(on_trial) {}

  Certification run() {
    if (gate() && search() && replicate())
      conclude();
    return std::move(m_c);
  }

private:
  const TrialResult& record(TrialResult result) {
    result.index = static_cast<int>(m_c.trials.size());
    m_c.trials.push_back(std::move(result));
    if (m_on_trial)
      m_on_trial(m_c.trials.back());
    return m_c.trials.back();
  }

  bool interrupted(const TrialResult& trial) {
    if (!trial.recording.interrupted && !interrupt_requested())
      return false;
    m_c.status = CertificationStatus::interrupted;
    m_c.stop_code = StopCode::interrupted;
    m_c.stop_reason = "interrupted";
    return true;
  }

  // Phase 1: the closed-loop gate — one request at a time; LB = E[1/latency].
  bool gate() {
    TrialResult gate;
    gate.phase = TrialPhase::gate;
    gate.planned_requests = m_options.gate_requests;
    gate.recording = m_runner.closed_loop(m_options.gate_requests, 1);
    auto summary_options = m_options.summary;
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
    m_c.lower_bound = n > 0 ? inverse / static_cast<double>(n) : 0.0;
    const auto& done = record(std::move(gate));
    if (interrupted(done))
      return false;
    if (!done.passed || m_c.lower_bound <= 0) {
      m_c.status = CertificationStatus::infeasible;
      m_c.binding = done.summary.failure.empty() ? "no request succeeded" : done.summary.failure;
      m_c.stop_code = StopCode::gate_failed;
      m_c.stop_reason = "the closed-loop gate failed";
      return false;
    }
    // A probe before each open-loop trial answers within half again the gate's p95.
    m_probe_limit = 1.5 * done.summary.e2e.p95 + 0.010;
    return true;
  }

  const TrialResult& run_at(double rate, TrialPhase phase, std::uint64_t seed) {
    TrialResult trial;
    trial.phase = phase;
    trial.rate = rate;
    trial.settle = m_runner.settle(m_probe_limit, m_options.settle_timeout_s);
    trial.planned_requests = trial_requests(m_options, rate);
    trial.recording = m_runner.open_loop(rate, trial.planned_requests, seed);
    auto summary_options = m_options.summary;
    summary_options.seed = seed;
    trial.summary = summarize_trial(trial.recording, summary_options);
    trial.client_limited = trial.summary.client_limited;
    trial.passed = trial.summary.failure.empty();
    return record(std::move(trial));
  }

  // Phase 2: open-loop trials, doubling while they pass, then bisecting (next_rate).
  bool search() {
    double lower = m_c.lower_bound; // highest rate known to pass (LB before the first pass)
    double upper = 0;               // lowest rate known to fail (0: none yet)
    double rate = m_options.initial_rate > 0 ? m_options.initial_rate : m_c.lower_bound;
    int search_trials = 0;
    bool retried_client_limit = false;
    while (search_trials < m_options.max_trials) {
      const auto& trial =
          run_at(rate, TrialPhase::search, m_options.seed + static_cast<std::uint64_t>(search_trials) + 1);
      ++search_trials;
      if (interrupted(trial))
        return false;
      if (trial.client_limited && !retried_client_limit) {
        // One rerun first: an OS hiccup on a shared machine delays a few sends once; a generator
        // that cannot hold the rate fails again.
        retried_client_limit = true;
        continue;
      }
      if (trial.client_limited) {
        m_c.status = CertificationStatus::client_limited;
        m_c.stop_code = StopCode::client_limited;
        m_c.stop_reason = fmt::format("the load generator could not hold {:.3g} req/s ({}); rates above {:.3g} "
                                      "req/s were not tested",
                                      rate, trial.summary.client_limited_reason, m_any_pass ? lower : 0.0);
        return true;
      }
      if (trial.passed) {
        m_any_pass = true;
        lower = rate;
        m_c.certified_rate = std::max(m_c.certified_rate, rate);
      } else {
        upper = rate;
        m_c.lowest_failing = rate;
        m_c.binding = trial.summary.failure;
      }
      if (m_any_pass && upper > 0 && upper - lower <= m_options.precision * lower) {
        m_c.converged = true;
        return true;
      }
      rate = next_rate(m_any_pass, lower, upper, rate);
    }
    return true;
  }

  // Phase 3, replicates: the boundary pass must hold every time; a failing replicate moves the
  // certificate down to the next highest rate that passed every run. A search that ended
  // CLIENT_LIMITED still replicates the rate it reports as passing.
  bool replicate() {
    if (m_options.replicates <= 1 || !m_any_pass)
      return true;
    std::vector<double> failed_at; // a rate that passed once and then failed: the machine's noise
    for (int k = 1; k < m_options.replicates && m_c.certified_rate > 0; ++k) {
      const auto& again =
          run_at(m_c.certified_rate, TrialPhase::replicate, m_options.seed + 1000 + static_cast<std::uint64_t>(k));
      if (interrupted(again))
        return false;
      if (!again.passed) {
        failed_at.push_back(m_c.certified_rate);
        m_c.lowest_failing = m_c.certified_rate;
        m_c.binding = again.summary.failure;
        double next = 0;
        for (const auto& t : m_c.trials)
          if (t.phase == TrialPhase::search && t.passed && t.rate < m_c.certified_rate)
            next = std::max(next, t.rate);
        m_c.certified_rate = next;
        m_c.converged = false;
        k = 0; // the new boundary gets its own replicates
      }
    }
    if (!failed_at.empty())
      m_c.replicate_noise = fmt::format(
          "a replicate failed at {:.4g} req/s after passing there ({} such rate{}): the trials on this machine vary "
          "more than a certificate allows, so {}",
          fmt::join(failed_at, ", "), failed_at.size(), failed_at.size() == 1 ? "" : "s",
          m_c.certified_rate > 0
              ? fmt::format("the certificate moved down to {:.4g} req/s, which passed every replicate",
                            m_c.certified_rate)
              : std::string("no rate passed every replicate"));
    return true;
  }

  // The verdict and why the search stopped.
  void conclude() {
    if (m_c.status != CertificationStatus::client_limited) {
      m_c.status = m_c.certified_rate > 0         ? CertificationStatus::feasible
                   : !m_c.replicate_noise.empty() ? CertificationStatus::noisy
                                                  : CertificationStatus::infeasible;
      m_c.stop_code = m_c.converged ? StopCode::converged : StopCode::trial_budget;
      m_c.stop_reason = m_c.converged ? fmt::format("converged: the passing and failing rates are within {:.0f} %",
                                                    m_options.precision * 100)
                                      : fmt::format("trial budget of {} open-loop trials spent", m_options.max_trials);
      if (m_c.status == CertificationStatus::infeasible && m_c.binding.empty())
        m_c.binding = "no open-loop rate passed";
    }
    if (!m_c.replicate_noise.empty())
      m_c.stop_reason += "; " + m_c.replicate_noise;
  }

  TrialRunner& m_runner;
  const CertifyOptions& m_options;
  const std::function<void(const TrialResult&)>& m_on_trial;
  Certification m_c;
  double m_probe_limit = 0;
  bool m_any_pass = false;
};

} // namespace

Certification
certify(TrialRunner& runner, const CertifyOptions& options, const std::function<void(const TrialResult&)>& on_trial) {
  return Certifier(runner, options, on_trial).run();
}

} // namespace optkit::bench
