#include "bench/trial_summary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace optkit::bench {

namespace {

// The error message without request-specific detail, so storms group into one line.
std::string
error_kind(const std::string& message) {
  return message.substr(0, std::min<std::size_t>(message.size(), 120));
}

SteadyState
fit_steady_state(const std::vector<const RequestRecord*>& measured, const SummaryOptions& options) {
  SteadyState s;
  std::vector<double> arrivals, completions;
  for (const auto* r : measured)
    if (r->ok()) {
      arrivals.push_back(r->intended);
      completions.push_back(r->end);
    }
  const auto fit = fit_line(completions, arrivals);
  s.beta = fit.slope;
  s.alpha = fit.intercept;
  s.r = fit.r;
  s.n = fit.n;
  s.stable = fit.n >= 3 && std::abs(s.beta - 1.0) <= options.beta_tolerance;
  // In flight at each measured arrival: requests scheduled before it and not yet ended. An end
  // never precedes its own arrival, so every end at or before t belongs to an earlier arrival.
  std::vector<double> times, counts, ends;
  for (const auto* r : measured)
    ends.push_back(std::max(r->end, r->intended));
  std::sort(ends.begin(), ends.end());
  for (std::size_t i = 0; i < measured.size(); ++i) {
    const double t = measured[i]->intended;
    const auto ended = static_cast<std::size_t>(std::upper_bound(ends.begin(), ends.end(), t) - ends.begin());
    times.push_back(t);
    counts.push_back(static_cast<double>(i + 1 - std::min(ended, i + 1)));
  }
  const auto trend = fit_line(times, counts);
  s.in_flight_slope = trend.slope;
  for (double c : counts)
    s.in_flight_mean += c / static_cast<double>(std::max<std::size_t>(1, counts.size()));
  if (!times.empty()) {
    // A stable queue's in-flight count wanders around a level; an overloaded one climbs. The
    // fitted rise over the window beyond the fitted level at its start means the count more
    // than doubled: arrivals outpace completions by more than noise explains.
    const double span = times.back() - times.front();
    const double level_at_start = trend.intercept + trend.slope * times.front();
    s.backlog_growing = trend.slope * span > std::max(2.0, level_at_start);
  }
  return s;
}

} // namespace

const LatencySummary&
TrialSummary::latency(LatencyMetric metric) const {
  switch (metric) {
  case LatencyMetric::ttft:
    return ttft;
  case LatencyMetric::tpot:
    return tpot;
  case LatencyMetric::itl:
    return itl;
  case LatencyMetric::e2e:
    return e2e;
  }
  return e2e;
}

std::size_t
tail_samples_needed(const std::vector<SloRule>& slos, std::size_t tail_k) {
  double q = 50;
  for (const auto& rule : slos)
    q = std::max(q, rule.is_mean() ? 50.0 : rule.percentile);
  return static_cast<std::size_t>(std::ceil(static_cast<double>(tail_k) / (1.0 - q / 100.0)));
}

namespace {

// Sets the window (warm-up and cool-down cut from the scheduled span) and returns the requests
// scheduled in it that were not cancelled as planned, by schedule.
std::vector<const RequestRecord*>
requests_in_window(const std::vector<RequestRecord>& all, const SummaryOptions& options, TrialSummary& t) {
  double first = 0, last = 0;
  if (!all.empty()) {
    first = all.front().intended;
    last = all.front().intended;
    for (const auto& r : all) {
      first = std::min(first, r.intended);
      last = std::max(last, r.intended);
    }
  }
  const double span = last - first;
  t.window_start = first + options.warmup_fraction * span;
  t.window_end = last - options.cooldown_fraction * span;
  std::vector<const RequestRecord*> measured;
  for (const auto& r : all) {
    if (r.intended < t.window_start || r.intended > t.window_end)
      continue;
    if (r.cancelled) // abandoned as planned: counted, never measured
      ++t.cancelled;
    else
      measured.push_back(&r);
  }
  std::sort(measured.begin(), measured.end(),
            [](const RequestRecord* a, const RequestRecord* b) { return a->intended < b->intended; });
  return measured;
}

// The measured requests' latency samples and totals.
struct Samples {
  std::vector<double> ttft, tpot, itl, e2e, lag, queue;
  std::size_t sent = 0; // sent at all (a request the generator never sent has no dispatch lag)
  double first_end = std::numeric_limits<double>::infinity(), last_end = -first_end;
  double output_tokens = 0, input_tokens = 0;
};

// Samples of the requests that succeeded; failures counted by kind.
Samples
collect_samples(const std::vector<const RequestRecord*>& measured, TrialSummary& t) {
  Samples s;
  for (const auto* r : measured) {
    if (r->sent >= 0) {
      ++s.sent;
      s.lag.push_back(r->dispatch_lag());
    }
    if (!r->ok()) {
      ++t.failed;
      ++t.errors[error_kind(r->error)];
      continue;
    }
    ++t.succeeded;
    s.ttft.push_back(r->ttft());
    s.e2e.push_back(r->e2e());
    if (r->tpot() >= 0)
      s.tpot.push_back(r->tpot());
    for (std::size_t i = 1; i < r->chunk_times.size(); ++i)
      s.itl.push_back(r->chunk_times[i] - r->chunk_times[i - 1]);
    if (r->server_queue_s >= 0)
      s.queue.push_back(r->server_queue_s);
    s.first_end = std::min(s.first_end, r->end);
    s.last_end = std::max(s.last_end, r->end);
    s.output_tokens += static_cast<double>(r->output_tokens);
    s.input_tokens += static_cast<double>(r->input_tokens);
  }
  return s;
}

void
set_rates(const Samples& s, TrialSummary& t) {
  t.error_rate = t.measured > 0 ? static_cast<double>(t.failed) / static_cast<double>(t.measured) : 0.0;
  if (t.succeeded > 0) {
    t.mean_input_tokens = s.input_tokens / static_cast<double>(t.succeeded);
    t.mean_output_tokens = s.output_tokens / static_cast<double>(t.succeeded);
  }
  // (N − 1) / (last end − first end): the rate completions leave at, without ramp-in (GuideLLM #93).
  if (t.succeeded >= 2 && s.last_end > s.first_end) {
    const double end_span = s.last_end - s.first_end;
    t.request_throughput = static_cast<double>(t.succeeded - 1) / end_span;
    const double share = static_cast<double>(t.succeeded - 1) / static_cast<double>(t.succeeded);
    t.output_token_throughput = s.output_tokens * share / end_span;
    t.input_token_throughput = s.input_tokens * share / end_span;
  }
  const double window = t.window_end - t.window_start;
  t.scheduled_rate = window > 0 ? static_cast<double>(t.measured) / window : 0.0;
}

void
summarize_samples(Samples s, const SummaryOptions& options, TrialSummary& t) {
  std::uint64_t seed = options.seed;
  t.ttft = summarize_latencies(std::move(s.ttft), seed++, options.bootstrap_resamples);
  t.tpot = summarize_latencies(std::move(s.tpot), seed++, options.bootstrap_resamples);
  t.itl = summarize_latencies(std::move(s.itl), seed++, 0);
  t.e2e = summarize_latencies(std::move(s.e2e), seed++, options.bootstrap_resamples);
  t.dispatch_lag = summarize_latencies(std::move(s.lag), seed++, 0);
  t.server_queue = summarize_latencies(std::move(s.queue), seed++, 0);
}

// One request's own figure for `metric`; ITL is its worst gap.
double
request_latency(const RequestRecord& r, LatencyMetric metric) {
  switch (metric) {
  case LatencyMetric::ttft:
    return r.ttft();
  case LatencyMetric::tpot:
    return std::max(0.0, r.tpot());
  case LatencyMetric::itl: {
    double worst = 0;
    for (std::size_t i = 1; i < r.chunk_times.size(); ++i)
      worst = std::max(worst, r.chunk_times[i] - r.chunk_times[i - 1]);
    return worst;
  }
  case LatencyMetric::e2e:
    return r.e2e();
  }
  return r.e2e();
}

// Each SLO's verdict on the trial's statistic; then goodput: a request is good when each of its
// own latencies meets every threshold (DistServe, vLLM --goodput).
void
judge_slos(const std::vector<const RequestRecord*>& measured, const SummaryOptions& options, TrialSummary& t) {
  for (const auto& rule : options.slos) {
    SloVerdict verdict{rule, t.latency(rule.metric).statistic(rule.percentile), false};
    verdict.passed = verdict.value >= 0 && rule.passes(verdict.value);
    t.slos_passed = t.slos_passed && verdict.passed;
    t.slos.push_back(verdict);
  }
  std::size_t good = 0;
  for (const auto* r : measured)
    if (r->ok() && std::all_of(options.slos.begin(), options.slos.end(),
                               [&](const SloRule& rule) { return rule.passes(request_latency(*r, rule.metric)); }))
      ++good;
  const double window = t.window_end - t.window_start;
  t.slo_attainment = t.measured > 0 ? static_cast<double>(good) / static_cast<double>(t.measured) : 0.0;
  t.goodput = window > 0 ? static_cast<double>(good) / window : 0.0;
  t.tail_samples_needed = tail_samples_needed(options.slos, options.tail_k);
}

// Open loop: whether the queue was steady, and whether the load generator kept its schedule.
void
judge_open_loop(const std::vector<const RequestRecord*>& measured, std::size_t sent, const SummaryOptions& options,
                TrialSummary& t) {
  t.steady = fit_steady_state(measured, options);
  t.sends_achieved = t.measured > 0 ? static_cast<double>(sent) / static_cast<double>(t.measured) : 1.0;
  // Sends late by a small share of the gap between arrivals leave the arrival process the
  // server sees as planned (and the latencies, counted from the schedule, take the delay).
  const double lag_bound =
      std::max(options.max_dispatch_lag_s, t.scheduled_rate > 0 ? options.lag_gap_share / t.scheduled_rate : 0.0);
  if (t.dispatch_lag.count > 0 && t.dispatch_lag.p99 > lag_bound) {
    t.generator_lagged = true;
    t.client_limited_reason =
        fmt::format("p99 dispatch lag {:.2f} ms exceeds {:.2f} ms", t.dispatch_lag.p99 * 1e3, lag_bound * 1e3);
  } else if (t.sends_achieved < 1.0 - options.send_rate_margin) {
    t.generator_lagged = true;
    t.client_limited_reason =
        fmt::format("only {:.1f} % of the scheduled requests were sent", t.sends_achieved * 100.0);
  }
  t.client_limited = t.generator_lagged && t.steady.stable && t.slos_passed && t.error_rate <= options.max_error_rate;
}

// Why the trial failed, first cause first (empty: it passed).
std::string
failure_reason(const TrialSummary& t, const SummaryOptions& options) {
  if (t.measured == 0)
    return "no request fell in the measurement window";
  if (t.client_limited)
    return "client-limited: " + t.client_limited_reason;
  if (t.error_rate > options.max_error_rate)
    return fmt::format("error rate {:.1f} % exceeds {:.1f} %", t.error_rate * 100, options.max_error_rate * 100);
  if (!t.slos_passed) {
    for (const auto& v : t.slos)
      if (!v.passed)
        return v.value < 0 ? fmt::format("SLO {}: no samples", v.rule.text)
                           : fmt::format("SLO {} violated: {} {} is {:.1f} ms", v.rule.text, to_string(v.rule.metric),
                                         v.rule.statistic_name(), v.value * 1e3);
  }
  if (options.open_loop && !t.steady.stable)
    return fmt::format("not steady: beta {:.3f} outside 1 ± {}", t.steady.beta, options.beta_tolerance);
  return {};
}

} // namespace

TrialSummary
summarize_trial(const TrialRecording& recording, const SummaryOptions& options) {
  TrialSummary t;
  t.requests = recording.requests.size();
  const auto measured = requests_in_window(recording.requests, options, t);
  t.measured = measured.size();
  auto samples = collect_samples(measured, t);
  const std::size_t sent = samples.sent;
  set_rates(samples, t);
  summarize_samples(std::move(samples), options, t);
  judge_slos(measured, options, t);
  if (options.open_loop)
    judge_open_loop(measured, sent, options, t);
  t.failure = failure_reason(t, options);
  t.stopped_early = recording.stopped_early;
  if (!t.stopped_early.empty()) // what it measured before stopping is not a whole trial
    t.failure = "stopped early: " + t.stopped_early;
  else if (t.generator_lagged && !t.client_limited && !t.failure.empty())
    t.failure = fmt::format("overloaded: {}, and the load generator fell behind as well ({})", t.failure,
                            t.client_limited_reason);
  return t;
}

} // namespace optkit::bench
