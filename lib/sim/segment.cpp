#include "sim/segment.hpp"

#include "core/error.hpp"
#include "core/random_source.hpp"
#include "core/statistics.hpp"

#include <algorithm>
#include <cmath>

namespace optkit::sim {

std::string
to_string(ArrivalKind kind) {
  switch (kind) {
  case ArrivalKind::poisson:
    return "poisson";
  case ArrivalKind::bursty:
    return "bursty";
  case ArrivalKind::closed_loop:
    return "closed";
  }
  return "?";
}

ArrivalKind
parse_arrivals(const std::string& text) {
  if (text == "poisson")
    return ArrivalKind::poisson;
  if (text == "bursty")
    return ArrivalKind::bursty;
  if (text == "closed")
    return ArrivalKind::closed_loop;
  throw InputError("arrivals '" + text + "' is not poisson, bursty or closed");
}

namespace {

std::int64_t
lognormal_length(RandomSource& random, double mean, double log_sd, std::int64_t cap) {
  // E[exp(N(μ, s²))] = exp(μ + s²/2) = mean.
  const double mu = std::log(std::max(mean, 1.0)) - log_sd * log_sd / 2;
  const double value = std::exp(mu + log_sd * random.normal());
  return std::clamp<std::int64_t>(std::llround(value), 1, std::max<std::int64_t>(1, cap));
}

} // namespace

std::vector<SimJob>
segment_jobs(const SegmentSpec& spec, std::uint64_t seed) {
  const auto& w = spec.workload;
  RandomSource random(seed);
  std::vector<SimJob> jobs;
  const auto lengths = [&](SimJob& job) {
    job.prompt_tokens = lognormal_length(random, w.prompt_mean, w.prompt_log_sd, w.max_prompt);
    job.output_tokens = lognormal_length(random, w.output_mean, w.output_log_sd, w.max_output);
  };
  if (w.arrivals == ArrivalKind::closed_loop) {
    // Clients send back to back; how many the window needs is unknown before serving, so give
    // them plenty: the segment stops sending nothing, it measures by arrival time.
    const std::size_t count = spec.min_completions * 3 + static_cast<std::size_t>(w.concurrency) * 4u;
    jobs.resize(count);
    for (auto& job : jobs)
      lengths(job);
    return jobs;
  }
  if (!(w.rate > 0))
    throw InputError("simulated arrival rate must be positive");
  const double measured_s = std::max(spec.min_duration_s, static_cast<double>(spec.min_completions) / w.rate);
  const double end = spec.warmup_s + measured_s;
  const double on_share = w.arrivals == ArrivalKind::bursty ? w.burst_on_s / (w.burst_on_s + w.burst_off_s) : 1.0;
  const double on_rate = w.rate / on_share;
  double t = 0;
  for (;;) {
    t += random.exponential(on_rate);
    if (w.arrivals == ArrivalKind::bursty) { // arrivals are drawn in "on" time, then mapped onto the cycle
      const double cycles = std::floor(t / w.burst_on_s);
      const double wall = cycles * (w.burst_on_s + w.burst_off_s) + (t - cycles * w.burst_on_s);
      if (wall > end)
        break;
      SimJob job;
      job.arrival = wall;
      lengths(job);
      jobs.push_back(job);
      continue;
    }
    if (t > end)
      break;
    SimJob job;
    job.arrival = t;
    lengths(job);
    jobs.push_back(job);
  }
  return jobs;
}

SegmentMetrics
measure(const std::vector<SimRequest>& requests, double window_start, double window_end, double slo_s) {
  SegmentMetrics m;
  std::vector<double> e2e;
  double ttft = 0, tokens = 0;
  std::size_t good = 0;
  for (const auto& r : requests) {
    if (r.end < 0 || r.arrival < window_start || r.arrival > window_end)
      continue;
    e2e.push_back(r.e2e());
    ttft += r.ttft();
    tokens += static_cast<double>(r.output_tokens);
    good += r.e2e() <= slo_s ? 1u : 0u;
  }
  m.measured = e2e.size();
  m.window_s = window_end - window_start;
  if (e2e.empty() || !(m.window_s > 0))
    return m;
  std::sort(e2e.begin(), e2e.end());
  m.p50 = percentile_of_sorted(e2e, 50);
  m.p95 = percentile_of_sorted(e2e, 95);
  m.p99 = percentile_of_sorted(e2e, 99);
  const double n = static_cast<double>(e2e.size());
  m.mean_ttft = ttft / n;
  m.goodput = static_cast<double>(good) / m.window_s;
  m.throughput = n / m.window_s;
  m.output_tokens_per_s = tokens / m.window_s;
  m.attainment = static_cast<double>(good) / n;
  return m;
}

SegmentMetrics
run_segment(const SimTiming& timing, const SimKnobs& knobs, const SegmentSpec& spec, std::uint64_t seed) {
  const auto jobs = segment_jobs(spec, seed);
  SimOptions options;
  options.seed = seed ^ 0x9e3779b97f4a7c15ULL;
  if (spec.workload.arrivals != ArrivalKind::closed_loop) {
    const auto served = run_open_loop(timing, knobs, jobs, options);
    const double end = served.empty() ? 0 : std::max_element(served.begin(), served.end(), [](auto& a, auto& b) {
                                              return a.arrival < b.arrival;
                                            })->arrival;
    return measure(served, spec.warmup_s, end, spec.slo_s);
  }
  const auto served = run_closed_loop(timing, knobs, jobs, spec.workload.concurrency, options);
  // The window: from warmup until both the duration and the completion count are reached.
  std::vector<double> arrivals;
  for (const auto& r : served)
    if (r.arrival >= spec.warmup_s && r.end >= 0)
      arrivals.push_back(r.arrival);
  std::sort(arrivals.begin(), arrivals.end());
  if (arrivals.empty())
    return measure(served, spec.warmup_s, spec.warmup_s, spec.slo_s);
  const std::size_t by_count = std::min(spec.min_completions, arrivals.size()) - 1;
  const double end = std::max(arrivals[by_count], std::min(arrivals.back(), spec.warmup_s + spec.min_duration_s));
  return measure(served, spec.warmup_s, end, spec.slo_s);
}

} // namespace optkit::sim
