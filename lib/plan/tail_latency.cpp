#include "plan/tail_latency.hpp"

#include "core/error.hpp"
#include "core/random_source.hpp"
#include "core/statistics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace optkit::plan {

namespace {

// When each request arrived, got its first token and ended (seconds), and its output tokens.
struct RequestTimes {
  double arrival = 0, first_token = 0, end = 0;
  double output_tokens = 1;
};

std::int64_t
prompt_length(const PlanRequest& r) {
  return std::max<std::int64_t>(1, std::llround(r.workload.isl - r.workload.prefix));
}

std::int64_t
output_length(const PlanRequest& r) {
  return std::max<std::int64_t>(1, std::llround(r.workload.osl));
}

// One replica's Poisson arrivals: the same unit-rate gaps for every rate, scaled, so that a higher
// rate gives the same requests earlier.
std::vector<double>
poisson_arrivals(int requests, double rate, std::uint64_t seed) {
  RandomSource random(seed);
  std::vector<double> arrivals(static_cast<std::size_t>(requests));
  double t = 0;
  for (double& arrival : arrivals) {
    t += random.exponential(1.0);
    arrival = t / rate;
  }
  return arrivals;
}

sim::SimTiming
timing_of(const StepCost& cost) {
  sim::SimTiming timing;
  timing.noise_cv = 0; // the step model's steps are deterministic; the arrivals carry the variance
  timing.step_cost = cost;
  return timing;
}

sim::SimKnobs
knobs_of(sim::Batching batching, int batch, std::int64_t step_tokens) {
  sim::SimKnobs knobs;
  knobs.batching = batching;
  knobs.max_num_seqs = batch;
  knobs.max_num_batched_tokens = step_tokens;
  return knobs;
}

// Jobs handed to `servers` workers in turn, in the order given; each worker's results go back to
// their job's place.
std::vector<sim::SimRequest>
serve_in_turn(const std::vector<sim::SimJob>& jobs, int servers, const sim::SimTiming& timing,
              const sim::SimKnobs& knobs) {
  std::vector<sim::SimRequest> out(jobs.size());
  for (int server = 0; server < servers; ++server) {
    std::vector<sim::SimJob> share;
    std::vector<std::size_t> places;
    for (std::size_t i = std::size_t(server); i < jobs.size(); i += std::size_t(servers)) {
      share.push_back(jobs[i]);
      places.push_back(i);
    }
    const auto served = sim::run_open_loop(timing, knobs, share, {});
    for (std::size_t k = 0; k < served.size(); ++k)
      out[places[k]] = served[k];
  }
  return out;
}

std::vector<RequestTimes>
serve_worker(const PlanRequest& r, const PlanRow& row, const StepCost& cost, const std::vector<double>& arrivals) {
  std::vector<sim::SimJob> jobs;
  for (double arrival : arrivals)
    jobs.push_back({arrival, prompt_length(r), output_length(r), false});
  const bool aggregated = row.mode == ServingMode::aggregated;
  const sim::SimKnobs knobs =
      aggregated ? knobs_of(sim::Batching::continuous, row.batch, std::int64_t(row.ctx_tokens) + row.batch)
                 : knobs_of(sim::Batching::static_batches, row.batch, 1);
  const auto served = sim::run_open_loop(timing_of(cost), knobs, jobs, {});
  std::vector<RequestTimes> times;
  for (const auto& s : served)
    times.push_back({s.arrival, s.first_token, s.end, double(s.output_tokens)});
  return times;
}

std::vector<RequestTimes>
serve_disaggregated(const PlanRequest& r, const PlanRow& row, const RowStepCosts& costs,
                    const std::vector<double>& arrivals) {
  std::vector<sim::SimJob> prompts;
  for (double arrival : arrivals)
    prompts.push_back({arrival, prompt_length(r), 1, false});
  const auto prefilled = serve_in_turn(prompts, row.prefill_workers, timing_of(costs.prefill_worker),
                                       knobs_of(sim::Batching::static_batches, row.prefill_batch, 1));
  std::vector<RequestTimes> times(arrivals.size());
  const double handoff_s = row.kv_transfer_ms / 1000.0;
  for (std::size_t i = 0; i < arrivals.size(); ++i)
    times[i] = {arrivals[i], prefilled[i].end + handoff_s, prefilled[i].end + handoff_s, 1.0};
  const std::int64_t decode_tokens = output_length(r) - 1;
  if (decode_tokens == 0)
    return times;
  // The decode workers take the handed-over requests in the order they arrive.
  std::vector<std::size_t> order(arrivals.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return times[a].first_token < times[b].first_token; });
  std::vector<sim::SimJob> decodes;
  for (std::size_t i : order)
    decodes.push_back({times[i].first_token, prompt_length(r), decode_tokens, true});
  const auto decoded = serve_in_turn(decodes, row.decode_workers, timing_of(costs.worker),
                                     knobs_of(sim::Batching::continuous, row.batch, row.batch));
  for (std::size_t k = 0; k < order.size(); ++k) {
    times[order[k]].end = decoded[k].end;
    times[order[k]].output_tokens = double(decode_tokens + 1);
  }
  return times;
}

struct Samples {
  std::vector<double> ttft, tpot, e2e; // ms, sorted

  const std::vector<double>& of(bench::LatencyMetric metric) const {
    switch (metric) {
    case bench::LatencyMetric::ttft:
      return ttft;
    case bench::LatencyMetric::tpot:
    case bench::LatencyMetric::itl:
      return tpot;
    case bench::LatencyMetric::e2e:
      break;
    }
    return e2e;
  }
};

// The requests after the warm-up tenth, by arrival.
Samples
measured_samples(std::vector<RequestTimes> times) {
  std::sort(times.begin(), times.end(), [](const auto& a, const auto& b) { return a.arrival < b.arrival; });
  Samples samples;
  for (std::size_t i = times.size() / 10; i < times.size(); ++i) {
    const RequestTimes& t = times[i];
    samples.ttft.push_back((t.first_token - t.arrival) * 1000.0);
    samples.e2e.push_back((t.end - t.arrival) * 1000.0);
    if (t.output_tokens > 1)
      samples.tpot.push_back((t.end - t.first_token) / (t.output_tokens - 1) * 1000.0);
  }
  for (auto* values : {&samples.ttft, &samples.tpot, &samples.e2e})
    std::sort(values->begin(), values->end());
  return samples;
}

double
statistic(const std::vector<double>& sorted, const bench::SloRule& rule) {
  if (sorted.empty())
    return 0;
  if (rule.is_mean())
    return std::accumulate(sorted.begin(), sorted.end(), 0.0) / double(sorted.size());
  return percentile_of_sorted(sorted, rule.percentile);
}

Percentiles
percentiles(const std::vector<double>& sorted) {
  if (sorted.empty())
    return {};
  return {percentile_of_sorted(sorted, 50), percentile_of_sorted(sorted, 95), percentile_of_sorted(sorted, 99),
          std::accumulate(sorted.begin(), sorted.end(), 0.0) / double(sorted.size())};
}

double
price_step(const perf::StepModel& model, const sim::SimStep& step, double prefix) {
  perf::StepBatch batch;
  for (const auto& chunk : step.prefills)
    batch.prefills.push_back({chunk.new_tokens, chunk.cached_tokens + prefix});
  for (double context : step.decode_contexts)
    batch.decode_kv_lens.push_back(context + prefix);
  if (batch.prefills.empty() && model.parallel().pp > 1) {
    // Decode steps keep every pipeline stage busy with a micro-batch each, as decode_interval prices them.
    const perf::StepShape shape = perf::equivalent_shape(batch);
    return model.step(model.decode_shape(shape.decode_requests, shape.kv_len)).us / 1e6;
  }
  return model.step(batch).us / 1e6;
}

} // namespace

RowPricing::RowPricing(const PlanRequest& request, const perf::SystemSpec& system, const perf::PerfDatabase& db,
                       const PlanRow& row)
    : m_request(request)
    , m_worker(request.model, system, db, row.parallel, request.precision, request.moe_power_law_alpha)
    , m_prefill_worker(request.model, system, db,
                       row.mode == ServingMode::disaggregated ? row.prefill_parallel : row.parallel, request.precision,
                       request.moe_power_law_alpha) {}

RowStepCosts
RowPricing::costs() const {
  const double prefix = m_request.workload.prefix;
  return {[this, prefix](const sim::SimStep& step) { return price_step(m_worker, step, prefix); },
          [this, prefix](const sim::SimStep& step) { return price_step(m_prefill_worker, step, prefix); }};
}

TailLatencies
simulate_row(const PlanRequest& request, const PlanRow& row, const RowStepCosts& costs, double rate,
             const TailOptions& options) {
  const std::vector<double> arrivals =
      poisson_arrivals(options.requests, rate / std::max(1, row.replicas), options.seed);
  const Samples samples =
      measured_samples(row.mode == ServingMode::disaggregated ? serve_disaggregated(request, row, costs, arrivals)
                                                              : serve_worker(request, row, costs.worker, arrivals));
  TailLatencies out;
  out.rate = rate;
  out.ttft = percentiles(samples.ttft);
  out.tpot = percentiles(samples.tpot);
  out.e2e = percentiles(samples.e2e);
  for (const bench::SloRule& rule : options.slos) {
    const double value_ms = statistic(samples.of(rule.metric), rule);
    if (!rule.passes(value_ms / 1000.0))
      out.misses.push_back(fmt::format("{} {} {:.0f} ms > {:g} ms", bench::to_string(rule.metric),
                                       rule.statistic_name(), value_ms, rule.threshold_s * 1000.0));
  }
  return out;
}

// How far past the row's mean-model rate the search looks: 2^3 = 8×. The mean model's aggregated
// TTFT carries AIConfigurator's 2–4× queueing correction, so short requests can sustain several times
// the rate it implies.
constexpr int kDoublings = 3;

RowTail
row_tail(const PlanRequest& request, const PlanRow& row, std::size_t index, const RowStepCosts& costs,
         const TailOptions& options) {
  RowTail tail;
  tail.row = index;
  if (options.rate)
    tail.at_rate = simulate_row(request, row, costs, *options.rate, options);
  const auto at = [&](double rate) { return simulate_row(request, row, costs, rate, options); };
  const double mean_rate = row.requests_per_s * std::max(1, row.replicas);
  double lo = 0, hi = mean_rate;
  std::optional<TailLatencies> held;
  TailLatencies failed = at(hi);
  for (int doubling = 0; failed.meets() && doubling < kDoublings; ++doubling) {
    lo = hi;
    held = failed;
    hi *= 2;
    failed = at(hi);
  }
  if (failed.meets()) {
    held = failed;
    tail.capacity_is_lower_bound = true;
  } else {
    for (int step = 0; step < 7; ++step) {
      TailLatencies mid = at((lo + hi) / 2);
      if (mid.meets()) {
        lo = mid.rate;
        held = mid;
      } else {
        hi = mid.rate;
        failed = mid;
      }
    }
  }
  tail.at_capacity = held ? *held : failed;
  if (held)
    tail.tokens_per_s_per_gpu = held->rate * request.workload.osl / double(row.replicas * row.unit_gpus);
  return tail;
}

std::vector<bench::SloRule>
plan_slos(const std::vector<std::string>& texts) {
  std::vector<bench::SloRule> rules = bench::parse_slos(texts);
  for (const auto& rule : rules)
    if (rule.metric == bench::LatencyMetric::itl)
      throw InputError("--slo " + rule.text +
                       ": plan bounds ttft, tpot and e2e (the simulator emits a decode step's tokens together, so "
                       "it has no inter-token latency of its own); use tpot");
  return rules;
}

} // namespace optkit::plan
