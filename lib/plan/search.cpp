#include "plan/search.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace optkit::plan {

namespace {

struct BatchRun {
  int from, to, step;
};

std::vector<int>
batch_schedule(std::initializer_list<BatchRun> runs) {
  std::vector<int> batches;
  for (const auto& run : runs)
    for (int v = run.from; v <= run.to; v += run.step)
      batches.push_back(v);
  return batches;
}

std::vector<int>
powers_of_two_up_to(int limit) {
  std::vector<int> values;
  for (int v = 1; v <= limit; v *= 2)
    values.push_back(v);
  return values;
}

std::vector<double>
context_budgets(const PlanRequest& request) {
  const double isl = prompt_tokens(request);
  std::vector<double> budgets = {isl, 2 * isl};
  if (request.engine != perf::Engine::trtllm)
    for (double chunk : {512.0, 1024.0, 2048.0, 4096.0, 8192.0})
      if (chunk < isl)
        budgets.push_back(chunk);
  return budgets;
}

perf::MemoryBudget
memory_for(const PlanRequest& r, const perf::SystemSpec& system, const perf::ParallelConfig& parallel,
           double step_tokens, double sequence_tokens) {
  return perf::memory_budget(r.model, system, parallel, r.precision, r.engine, r.memory_fraction, step_tokens,
                             sequence_tokens);
}

PlanRow
worker_row(const PlanRequest& r, ServingMode mode, const perf::ParallelConfig& parallel, int batch,
           const LatencyEstimate& latency, const perf::MemoryBudget& memory) {
  const double osl = r.workload.osl;
  PlanRow row;
  row.mode = mode;
  row.parallel = parallel;
  row.batch = batch;
  row.ttft_ms = latency.ttft_ms;
  row.tpot_ms = latency.tpot_ms;
  row.sources = latency.sources;
  row.unit_gpus = parallel.gpus();
  row.replicas = r.gpus / row.unit_gpus;
  row.requests_per_s = batch / (latency.ttft_ms + (osl - 1) * latency.tpot_ms) * 1000.0;
  if (latency.max_requests_per_s > 0)
    row.requests_per_s = std::min(row.requests_per_s, latency.max_requests_per_s);
  row.tokens_per_s_per_gpu = row.requests_per_s * osl / row.unit_gpus;
  row.tokens_per_s_per_user = latency.tpot_ms > 0 ? 1000.0 / latency.tpot_ms : 0;
  row.memory_gib = memory.used_gib(batch);
  return row;
}

// Tallies what the search priced and what it dropped for memory.
void
count(PlanResult& result, const PricedRow& priced) {
  if (priced || priced.error() == Unpriced::no_decode_slot) // estimated, whether or not it gave a row
    ++result.evaluations;
  else if (priced.error() == Unpriced::out_of_memory)
    ++result.memory_infeasible;
}

void
search_worker_modes(const PlanRequest& r, const perf::SystemSpec& system, const perf::PerfDatabase& db,
                    const perf::ParallelConfig& parallel, bool static_mode, bool aggregated, PlanResult& result) {
  const perf::StepModel model(r.model, system, db, parallel, r.precision, r.moe_power_law_alpha, r.attention_kernels());
  const auto add = [&](const PricedRow& priced) {
    count(result, priced);
    if (priced)
      result.rows.push_back(*priced);
  };
  if (static_mode)
    for (int batch : aggregated_batches())
      add(price_worker(r, system, model, {ServingMode::static_batching, batch, 0}));
  if (aggregated)
    for (double ctx : context_budgets(r))
      for (int batch : aggregated_batches())
        add(price_worker(r, system, model, {ServingMode::aggregated, batch, ctx}));
}

void
search_disaggregated(const PlanRequest& r, const perf::SystemSpec& system, const perf::PerfDatabase& db,
                     const std::vector<perf::ParallelConfig>& layouts, PlanResult& result) {
  std::vector<PrefillCandidate> prefills;
  std::vector<DecodeCandidate> decodes;
  for (const auto& parallel : layouts) {
    if (parallel.gpus() >= r.gpus)
      continue; // a unit needs at least one prefill and one decode worker
    const perf::StepModel model(r.model, system, db, parallel, r.precision, r.moe_power_law_alpha,
                                r.attention_kernels());
    for (int batch : {1, 2, 4, 8}) {
      const auto prefill = price_prefill(r, system, model, batch);
      if (!prefill)
        ++result.memory_infeasible;
      else {
        ++result.evaluations;
        prefills.push_back(*prefill);
      }
    }
    for (int batch : decode_batches()) {
      const auto decode = price_decode(r, system, model, batch);
      if (!decode)
        ++result.memory_infeasible;
      else {
        ++result.evaluations;
        decodes.push_back(*decode);
      }
    }
  }
  if (prefills.empty() || decodes.empty())
    return;
  // Algorithm 3 step 1: prefill candidates within the TTFT limit (with β); when none is, the
  // fastest stands in so the rows still show how far off the limit is.
  std::vector<const PrefillCandidate*> eligible;
  for (const auto& p : prefills)
    if (p.ttft_ms * r.disaggregation.beta_ttft <= r.ttft_limit_ms)
      eligible.push_back(&p);
  if (eligible.empty())
    eligible.push_back(&*std::min_element(prefills.begin(), prefills.end(),
                                          [](const auto& a, const auto& b) { return a.ttft_ms < b.ttft_ms; }));
  for (const auto& d : decodes) {
    std::optional<PlanRow> best;
    double best_per_gpu = 0;
    for (const PrefillCandidate* p : eligible) {
      const std::optional<PlanRow> row = disaggregated_row(r, system, *p, d);
      if (row && row->requests_per_s / row->unit_gpus > best_per_gpu) {
        best_per_gpu = row->requests_per_s / row->unit_gpus;
        best = row;
      }
    }
    if (best)
      result.rows.push_back(*best);
  }
}

} // namespace

double
prompt_tokens(const PlanRequest& r) {
  return std::max(1.0, r.workload.isl - r.workload.prefix);
}

perf::MemoryBudget
worker_memory(const PlanRequest& r, const perf::SystemSpec& system, const perf::ParallelConfig& parallel,
              const WorkerConfiguration& c) {
  const double sequence = r.workload.isl + r.workload.osl;
  switch (c.mode) {
  case ServingMode::static_batching:
    return memory_for(r, system, parallel, c.batch * prompt_tokens(r), sequence);
  case ServingMode::aggregated:
    return memory_for(r, system, parallel, c.ctx_tokens + 1024, sequence);
  case ServingMode::disaggregated:
    break;
  }
  return memory_for(r, system, parallel, 1024, sequence);
}

PricedRow
price_worker(const PlanRequest& r, const perf::SystemSpec& system, const perf::StepModel& model,
             const WorkerConfiguration& c) {
  const perf::ParallelConfig& parallel = model.parallel();
  const double ctx = c.ctx_tokens;
  if (c.mode == ServingMode::aggregated && c.batch > 1 && ctx > prompt_tokens(r) * c.batch)
    return Unpriced::prompt_budget_over_batch;
  const perf::MemoryBudget memory = worker_memory(r, system, parallel, c);
  if (!memory.fits(c.batch))
    return Unpriced::out_of_memory;
  if (c.mode == ServingMode::static_batching)
    return worker_row(r, c.mode, parallel, c.batch, estimate_static(model, r.workload, c.batch, r.speculation), memory);
  LatencyEstimate latency;
  if (!estimate_aggregated(model, r.workload, c.batch, ctx, r.speculation, latency))
    return Unpriced::no_decode_slot;
  PlanRow row = worker_row(r, c.mode, parallel, c.batch, latency, memory);
  row.ctx_tokens = int(ctx);
  return row;
}

Priced<PrefillCandidate>
price_prefill(const PlanRequest& r, const perf::SystemSpec& system, const perf::StepModel& model, int batch) {
  const perf::MemoryBudget memory = memory_for(r, system, model.parallel(), batch * prompt_tokens(r), r.workload.isl);
  if (!memory.fits(batch))
    return Unpriced::out_of_memory;
  const perf::Estimate step = model.step(prefill_shape(r, batch));
  const double ttft = step.us / 1000.0;
  return PrefillCandidate{model.parallel(), batch, ttft, batch / ttft * 1000.0, step.sources};
}

Priced<DecodeCandidate>
price_decode(const PlanRequest& r, const perf::SystemSpec& system, const perf::StepModel& model, int batch) {
  const perf::MemoryBudget memory = worker_memory(r, system, model.parallel(), {ServingMode::disaggregated, batch, 0});
  if (!memory.fits(batch))
    return Unpriced::out_of_memory;
  // A decode worker's TPOT: Algorithm 1's generation phase (its TTFT is the prefill pool's).
  const perf::Estimate tpot = estimate_generation(model, r.workload, batch, r.speculation);
  const double tpot_ms = tpot.us / 1000.0;
  const double generation_ms = std::max(1.0, r.workload.osl - 1) * tpot_ms;
  return DecodeCandidate{model.parallel(),       batch,       tpot_ms, batch / generation_ms * 1000.0,
                         memory.used_gib(batch), tpot.sources};
}

perf::StepShape
prefill_shape(const PlanRequest& r, int batch) {
  perf::StepShape shape;
  shape.prefill_requests = batch;
  shape.prefill_tokens = prompt_tokens(r);
  shape.prefix = r.workload.prefix;
  return shape;
}

std::optional<PlanRow>
disaggregated_row(const PlanRequest& r, const perf::SystemSpec& system, const PrefillCandidate& p,
                  const DecodeCandidate& d, WorkerCounts workers) {
  const RateMatch match = workers.prefill > 0
                              ? unit_rate(p.requests_per_s, p.parallel.gpus(), d.requests_per_s, d.parallel.gpus(),
                                          workers.prefill, workers.decode, r.disaggregation)
                              : rate_match(p.requests_per_s, p.parallel.gpus(), d.requests_per_s, d.parallel.gpus(),
                                           r.gpus, r.disaggregation);
  if (match.gpus == 0 || match.gpus > r.gpus)
    return std::nullopt;
  // KV cache handed from the prefill to the decode worker, each GPU sending its shard.
  const double kv_bytes = perf::kv_cache_bytes(r.model, r.precision, r.workload.isl);
  const int link_gpus = std::min(p.parallel.gpus(), d.parallel.gpus());
  const double bandwidth = system.link_bytes_per_s(match.gpus) * system.efficiency.communication * link_gpus;
  PlanRow row;
  row.mode = ServingMode::disaggregated;
  row.parallel = d.parallel;
  row.batch = d.batch;
  row.prefill_parallel = p.parallel;
  row.prefill_batch = p.batch;
  row.prefill_workers = match.prefill_workers;
  row.decode_workers = match.decode_workers;
  row.kv_transfer_ms = kv_bytes / bandwidth * 1000.0 + system.collective_latency_us / 1000.0;
  row.ttft_ms = p.ttft_ms * r.disaggregation.beta_ttft + row.kv_transfer_ms;
  row.tpot_ms = d.tpot_ms;
  row.unit_gpus = match.gpus;
  row.replicas = r.gpus / match.gpus;
  row.requests_per_s = match.requests_per_s;
  row.tokens_per_s_per_gpu = match.requests_per_s * r.workload.osl / match.gpus;
  row.tokens_per_s_per_user = 1000.0 / d.tpot_ms;
  row.memory_gib = d.memory_gib;
  row.sources = std::uint8_t(p.sources | d.sources);
  return row;
}

std::string
mode_name(ServingMode mode) {
  switch (mode) {
  case ServingMode::static_batching:
    return "static";
  case ServingMode::aggregated:
    return "agg";
  case ServingMode::disaggregated:
    return "disagg";
  }
  return "?";
}

ServingMode
parse_mode(const std::string& text) {
  if (text == "static")
    return ServingMode::static_batching;
  if (text == "agg")
    return ServingMode::aggregated;
  if (text == "disagg")
    return ServingMode::disaggregated;
  throw InputError("--mode " + text + ": unknown serving mode; use static, agg or disagg (comma-separated)");
}

const std::vector<int>&
aggregated_batches() {
  static const std::vector<int> batches = batch_schedule(
      {{1, 15, 1}, {16, 28, 4}, {32, 56, 8}, {64, 240, 16}, {256, 480, 32}, {512, 512, 1}, {1024, 1024, 1}});
  return batches;
}

const std::vector<int>&
decode_batches() {
  static const std::vector<int> batches =
      batch_schedule({{1, 15, 1}, {16, 30, 2}, {32, 124, 4}, {128, 504, 8}, {512, 512, 1}});
  return batches;
}

std::vector<perf::ParallelConfig>
worker_layouts(const perf::ModelArch& model, const perf::SystemSpec& system, int max_gpus) {
  std::vector<perf::ParallelConfig> layouts;
  for (int tp : powers_of_two_up_to(std::min(system.gpus_per_node, max_gpus))) {
    if (model.heads % tp != 0)
      continue;
    const std::vector<int> dps =
        model.is_moe() ? powers_of_two_up_to(std::min(system.gpus_per_node, max_gpus) / tp) : std::vector<int>{1};
    for (int dp : dps)
      for (int pp : powers_of_two_up_to(std::min(max_gpus, model.layers))) {
        const int gpus = tp * dp * pp;
        if (gpus > max_gpus || max_gpus % gpus != 0)
          continue;
        const std::vector<int> eps = model.is_moe() ? powers_of_two_up_to(tp * dp) : std::vector<int>{1};
        for (int ep : eps) {
          perf::ParallelConfig p{tp, pp, dp, ep};
          if (model.is_moe() && (model.experts % ep != 0 || model.moe_intermediate % p.moe_tp() != 0))
            continue;
          layouts.push_back(p);
        }
      }
  }
  return layouts;
}

bool
engine_can_run(perf::Engine engine, const perf::ParallelConfig& layout) {
  if (engine != perf::Engine::llamacpp)
    return true;
  // llama-server splits by rows (-sm row) or by layers (-sm layer), one way at a time, with no
  // attention data parallelism or expert parallelism.
  return (layout.tp == 1 || layout.pp == 1) && layout.dp == 1 && layout.ep == 1;
}

PlanResult
enumerate_configurations(const PlanRequest& request, const perf::SystemSpec& system, const perf::PerfDatabase& db) {
  const auto start = std::chrono::steady_clock::now();
  PlanResult result;
  auto layouts = worker_layouts(request.model, system, request.gpus);
  std::erase_if(layouts, [&](const perf::ParallelConfig& p) { return !engine_can_run(request.engine, p); });
  result.worker_layouts = layouts.size();
  const auto wants = [&](ServingMode mode) {
    return std::find(request.modes.begin(), request.modes.end(), mode) != request.modes.end();
  };
  for (const auto& parallel : layouts)
    search_worker_modes(request, system, db, parallel, wants(ServingMode::static_batching),
                        wants(ServingMode::aggregated), result);
  if (wants(ServingMode::disaggregated))
    search_disaggregated(request, system, db, layouts, result);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

PlanResult
search(const PlanRequest& request, const perf::SystemSpec& system, const perf::PerfDatabase& db) {
  const auto start = std::chrono::steady_clock::now();
  PlanResult result = enumerate_configurations(request, system, db);
  select_configurations(request, result);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::string
describe(const PlanRow& row, bool moe) {
  if (row.mode == ServingMode::disaggregated)
    return "disagg " + std::to_string(row.prefill_workers) + "P(" + row.prefill_parallel.label(moe) + ", batch " +
           std::to_string(row.prefill_batch) + ") + " + std::to_string(row.decode_workers) + "D(" +
           row.parallel.label(moe) + ", batch " + std::to_string(row.batch) + ")";
  std::string text = mode_name(row.mode) + " " + row.parallel.label(moe) + " x" + std::to_string(row.replicas) +
                     ", batch " + std::to_string(row.batch);
  if (row.mode == ServingMode::aggregated)
    text += ", " + std::to_string(row.ctx_tokens) + " prompt tokens/step";
  return text;
}

} // namespace optkit::plan
