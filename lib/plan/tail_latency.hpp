// Percentile SLAs under Poisson arrivals. plan's latencies are per-step means without queueing, but
// SLOs are stated as p95/p99 under real arrivals (OptiKit certifies `e2e:p95`). For a planned row,
// optkit's discrete-event simulator (lib/sim) serves a Poisson stream with the row's batching,
// each step priced by the same step model the row was priced with, and the request latencies give
// p50/p95/p99 of TTFT, TPOT and E2E: at a requested rate, and at the highest rate whose SLOs hold.
//
// How a row is served: requests are spread at random over the row's replicas (each sees Poisson
// arrivals at rate / replicas). Aggregated: one worker, continuous batching of `batch` sequences
// with `ctx_tokens` prompt tokens per step. Static: batches of up to `batch` formed when the
// worker is idle, padded to the longest prompt. Disaggregated: the unit's prefill workers take
// requests in turn, prefill batches of up to `prefill_batch`, and hand each KV cache over (the
// row's transfer time) to the decode workers, in turn, which batch continuously. The first token
// is the prefill worker's.
#pragma once

#include "bench/slo.hpp"
#include "plan/search.hpp"
#include "sim/serving_simulator.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace optkit::plan {

struct TailOptions {
  std::vector<bench::SloRule> slos; // on ttft, tpot or e2e (percentiles or means)
  std::optional<double> rate;       // requests/s over the deployment; none: only the highest rate
  int requests = 2000;              // simulated per evaluation; the first tenth is warm-up
  std::uint64_t seed = 1;
};

struct Percentiles {
  double p50 = 0, p95 = 0, p99 = 0, mean = 0; // ms
};

struct TailLatencies {
  double rate = 0; // requests/s over the deployment
  Percentiles ttft, tpot, e2e;
  std::vector<std::string> misses; // "e2e p95 383 ms > 300 ms"; empty when every SLO holds
  bool meets() const { return misses.empty(); }
};

// The price of one step on a worker, in seconds.
using StepCost = std::function<double(const sim::SimStep&)>;
struct RowStepCosts {
  StepCost worker;         // the aggregated/static worker, or the decode worker
  StepCost prefill_worker; // disaggregated only
};

// The step model's prices for a row's workers (thread-safe, as the step model is).
class RowPricing {
public:
  RowPricing(const PlanRequest& request, const perf::SystemSpec& system, const perf::PerfDatabase& db,
             const PlanRow& row);
  RowStepCosts costs() const;

private:
  const PlanRequest& m_request;
  perf::StepModel m_worker, m_prefill_worker;
};

// Serves `options.requests` Poisson arrivals at `rate` (over the deployment) with the row's
// batching and judges the SLOs.
TailLatencies simulate_row(const PlanRequest& request, const PlanRow& row, const RowStepCosts& costs, double rate,
                           const TailOptions& options);

struct RowTail {
  std::size_t row = 0;
  std::optional<TailLatencies> at_rate; // at TailOptions::rate
  TailLatencies at_capacity;            // at the highest rate whose SLOs hold (rate 0: none does)
  bool capacity_is_lower_bound = false; // the SLOs still held at 8× the mean-model rate
  double tokens_per_s_per_gpu = 0;      // at that capacity, over the GPUs the row uses
};

// The highest rate whose SLOs hold: from the row's mean-model rate, doubled while they hold (up to
// 8×, past which the rate is reported as a lower bound), then bisected (the same arrivals scaled,
// so latencies grow with the rate) 7 times.
RowTail row_tail(const PlanRequest& request, const PlanRow& row, std::size_t index, const RowStepCosts& costs,
                 const TailOptions& options);

// "e2e:p95<=500ms" rules checked for plan: metrics ttft, tpot and e2e (InputError otherwise).
std::vector<bench::SloRule> plan_slos(const std::vector<std::string>& texts);

} // namespace optkit::plan
