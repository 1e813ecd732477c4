#include "plan/estimate_run.hpp"

#include "core/error.hpp"
#include "core/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace optkit::plan {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

ServingMode
single_mode(const std::string& text) {
  if (text.find(',') != std::string::npos)
    throw InputError("--mode " + text + ": plan estimate prices one configuration; give one of static, agg, disagg");
  return parse_mode(std::string(trim(text)));
}

// The layout must be one the search forms for this model, GPU count and engine. `flag_prefix`:
// "--" for the worker (or decode worker), "--prefill-" for the prefill worker.
void
check_layout(const PlanRequest& r, const perf::SystemSpec& system, const perf::ParallelConfig& layout,
             const std::string& flag_prefix) {
  std::vector<std::string> allowed;
  for (const auto& candidate : worker_layouts(r.model, system, r.gpus)) {
    if (!engine_can_run(r.engine, candidate))
      continue;
    if (candidate.tp == layout.tp && candidate.pp == layout.pp && candidate.dp == layout.dp &&
        candidate.ep == layout.ep)
      return;
    allowed.push_back(candidate.label(r.model.is_moe()));
  }
  std::string flags = fmt::format("{0}tp {1} {0}pp {2}", flag_prefix, layout.tp, layout.pp);
  if (r.model.is_moe())
    flags += fmt::format(" {0}dp {1} {0}ep {2}", flag_prefix, layout.dp, layout.ep);
  throw InputError(fmt::format("{}: {} is not a worker layout plan searches for {} on {} x {} with {}; use one of {}",
                               flags, layout.label(r.model.is_moe()), r.model.name, r.gpus, system.name,
                               perf::engine_name(r.engine), allowed.empty() ? "none" : join(allowed, ", ")));
}

std::string
memory_refusal(const PlanRequest& r, const perf::ParallelConfig& layout, int batch, const perf::MemoryBudget& memory) {
  const std::string worker = layout.label(r.model.is_moe());
  if (memory.kv_budget_bytes <= 0)
    return fmt::format("{}: the weights ({:.1f} GiB per GPU) leave no room for a KV cache; raise --tp/--pp or lower "
                       "--weight-dtype",
                       worker, memory.weight_bytes / kGiB);
  return fmt::format("--batch {}: {} holds the KV cache of {} sequences of ISL + OSL at most ({:.2f} GiB per GPU "
                     "each); lower --batch, widen the worker or lower --kv-dtype",
                     batch, worker, int(std::floor(memory.max_sequences())), memory.kv_bytes_per_sequence / kGiB);
}

std::string
unpriced_text(Unpriced why, const PlanRequest& r, const EstimateOptions& o, const perf::ParallelConfig& layout,
              const perf::MemoryBudget& memory) {
  switch (why) {
  case Unpriced::out_of_memory:
    return memory_refusal(r, layout, o.batch, memory);
  case Unpriced::prompt_budget_over_batch:
    return fmt::format("--ctx-tokens {}: more prompt tokens per step than the batch's {} prompts hold; lower "
                       "--ctx-tokens or raise --batch",
                       o.ctx_tokens, o.batch);
  case Unpriced::no_decode_slot:
    return fmt::format("--batch {}: no sequence is left to decode beside --ctx-tokens {} of prompts per step; raise "
                       "--batch or lower --ctx-tokens",
                       o.batch, o.ctx_tokens);
  }
  return "not priced";
}

PricedStep
priced_step(const std::string& name, const perf::StepModel& model, const perf::StepShape& shape, bool moe) {
  return {name, model.parallel().label(moe), shape, model.step_parts(shape)};
}

perf::StepShape
decode_step_shape(const PlanRequest& r, const perf::StepModel& model, int batch) {
  const int tokens_per_decode = r.speculation.enabled() ? r.speculation.draft_tokens + 1 : 1;
  return model.decode_shape(batch, r.workload.isl + r.workload.osl / 2.0, tokens_per_decode);
}

void
estimate_worker(const EstimateOptions& o, const perf::PerfDatabase& db, EstimateRun& run, ServingMode mode) {
  const PlanRequest& r = run.request;
  const bool moe = r.model.is_moe();
  const perf::StepModel model(r.model, run.system, db, o.parallel, r.precision, r.moe_power_law_alpha,
                              r.attention_kernels());
  const WorkerConfiguration configuration{mode, o.batch, o.ctx_tokens > 0 ? double(o.ctx_tokens) : prompt_tokens(r)};
  run.memory = worker_memory(r, run.system, o.parallel, configuration);
  const PricedRow priced = price_worker(r, run.system, model, configuration);
  if (!priced)
    throw InputError(unpriced_text(priced.error(), r, o, o.parallel, run.memory));
  run.row = *priced;
  if (mode == ServingMode::static_batching)
    run.steps.push_back(priced_step("prefill", model, prefill_shape(r, o.batch), moe));
  else
    run.steps.push_back(priced_step(
        "mixed", model, aggregated_steps(r.workload, o.batch, configuration.ctx_tokens, r.speculation)->mix, moe));
  run.steps.push_back(priced_step("decode", model, decode_step_shape(r, model, o.batch), moe));
}

void
estimate_disaggregated(const EstimateOptions& o, const perf::PerfDatabase& db, EstimateRun& run) {
  const PlanRequest& r = run.request;
  const bool moe = r.model.is_moe();
  const perf::StepModel prefill_model(r.model, run.system, db, o.prefill_parallel, r.precision, r.moe_power_law_alpha,
                                      r.attention_kernels());
  const perf::StepModel decode_model(r.model, run.system, db, o.parallel, r.precision, r.moe_power_law_alpha,
                                     r.attention_kernels());
  const auto prefill = price_prefill(r, run.system, prefill_model, o.prefill_batch);
  if (!prefill)
    throw InputError("--prefill-batch " + std::to_string(o.prefill_batch) + ": " + o.prefill_parallel.label(moe) +
                     " cannot hold that many prompts at once; lower --prefill-batch or widen the prefill worker");
  run.memory = worker_memory(r, run.system, o.parallel, {ServingMode::disaggregated, o.batch, 0});
  const auto decode = price_decode(r, run.system, decode_model, o.batch);
  if (!decode)
    throw InputError(memory_refusal(r, o.parallel, o.batch, run.memory));
  const std::optional<PlanRow> row = disaggregated_row(r, run.system, *prefill, *decode, o.workers);
  if (!row && o.workers.prefill > 0)
    throw InputError(
        fmt::format("--prefill-workers {} --decode-workers {}: the unit needs {} GPUs, more than --gpus {}",
                    o.workers.prefill, o.workers.decode,
                    o.workers.prefill * o.prefill_parallel.gpus() + o.workers.decode * o.parallel.gpus(), r.gpus));
  if (!row)
    throw InputError(
        fmt::format("no xPyD unit of a {}-GPU prefill worker and a {}-GPU decode worker divides --gpus {}; "
                    "change --gpus or the workers",
                    o.prefill_parallel.gpus(), o.parallel.gpus(), r.gpus));
  run.row = *row;
  run.steps.push_back(priced_step("prefill", prefill_model, prefill_shape(r, o.prefill_batch), moe));
  run.steps.push_back(priced_step("decode", decode_model, decode_step_shape(r, decode_model, o.batch), moe));
}

void
check_counts(const EstimateOptions& o, ServingMode mode) {
  if (o.batch < 1 || o.batch > 4096)
    throw InputError("--batch " + std::to_string(o.batch) + ": use 1 to 4096 sequences");
  if (o.ctx_tokens < 0)
    throw InputError("--ctx-tokens " + std::to_string(o.ctx_tokens) + ": use 0 (a whole prompt) or more tokens");
  if (o.ctx_tokens > 0 && mode != ServingMode::aggregated)
    throw InputError("--ctx-tokens: only aggregated serving (--mode agg) mixes prompt chunks into decode steps");
  if (mode == ServingMode::disaggregated && (o.prefill_batch < 1 || o.prefill_batch > 64))
    throw InputError("--prefill-batch " + std::to_string(o.prefill_batch) + ": use 1 to 64 prompts");
  const bool counted = o.workers.prefill != 0 || o.workers.decode != 0;
  if (counted && mode != ServingMode::disaggregated)
    throw InputError("--prefill-workers and --decode-workers: only disaggregated serving (--mode disagg) has pools");
  if (counted && (o.workers.prefill < 1 || o.workers.prefill > 64 || o.workers.decode < 1 || o.workers.decode > 64))
    throw InputError(fmt::format("--prefill-workers {} --decode-workers {}: give both, each 1 to 64", o.workers.prefill,
                                 o.workers.decode));
}

void
archive_estimate(const EstimateRun& run, const archive::RunContext& context) {
  if (!context.recording())
    return;
  auto& archive = *context.archive;
  const PlanRow& row = run.row;
  archive.transaction([&] {
    archive.add_metric(context.run_id, std::nullopt, {"ttft", row.ttft_ms, "ms", {}});
    archive.add_metric(context.run_id, std::nullopt, {"tpot", row.tpot_ms, "ms", {}});
    archive.add_metric(context.run_id, std::nullopt,
                       {"tokens_per_s_per_gpu", row.tokens_per_s_per_gpu, "tokens/s", {}});
    archive.add_metric(context.run_id, std::nullopt,
                       {"tokens_per_s_per_user", row.tokens_per_s_per_user, "tokens/s", {}});
    archive.add_metric(context.run_id, std::nullopt, {"memory_per_gpu", row.memory_gib, "GiB", {}});
  });
}

double
ms(const perf::Estimate& estimate) {
  return std::round(estimate.us) / 1000.0;
}

} // namespace

EstimateRun
run_estimate(const EstimateOptions& options, const archive::RunContext& context) {
  EstimateRun run;
  PlanOptions plan_options = options.plan;
  plan_options.modes = options.mode;
  const ServingMode mode = single_mode(options.mode);
  check_counts(options, mode);
  run.request = plan_request(plan_options);
  run.system = load_plan_system(plan_options);
  const perf::PerfDatabase db = load_perf_database(plan_options, run.system);
  run.perf_db_directory = db.directory().string();
  check_layout(run.request, run.system, options.parallel, "--");
  if (mode == ServingMode::disaggregated) {
    check_layout(run.request, run.system, options.prefill_parallel, "--prefill-");
    estimate_disaggregated(options, db, run);
  } else {
    estimate_worker(options, db, run, mode);
  }
  judge_sla(run.request, run.row);
  archive_estimate(run, context);
  return run;
}

Table
estimate_table(const EstimateRun& run) {
  std::vector<std::string> columns = {"step", "worker", "tokens"};
  for (std::size_t part = 0; part < perf::kStepParts; ++part)
    columns.push_back(perf::step_part_name(perf::StepPart(part)) + "_ms");
  columns.insert(columns.end(), {"total_ms", "sources"});
  Table table(columns);
  for (const PricedStep& step : run.steps) {
    const perf::StepShape& s = step.shape;
    std::vector<nlohmann::json> cells = {
        step.name, step.worker, s.prefill_requests * s.prefill_tokens + s.decode_requests * s.tokens_per_decode};
    for (const perf::Estimate& part : step.parts.parts)
      cells.push_back(ms(part));
    const perf::Estimate total = step.parts.total();
    cells.push_back(ms(total));
    cells.push_back(perf::source_names(total.sources));
    table.add_row(std::move(cells));
  }
  return table;
}

std::string
estimate_summary(const EstimateRun& run) {
  const PlanRequest& r = run.request;
  const PlanRow& row = run.row;
  const perf::MemoryBudget& m = run.memory;
  std::string text =
      fmt::format("{} on {} x {} ({}), ISL {:g} / OSL {:g}, engine {}\n", r.model.name, r.gpus, run.system.name,
                  run.system.gpu_name, r.workload.isl, r.workload.osl, perf::engine_name(r.engine));
  text += fmt::format("configuration: {}\n", describe(row, r.model.is_moe()));
  text += fmt::format("TTFT {:.1f} ms, TPOT {:.2f} ms ({:.1f} tokens/s/user), request latency {:.0f} ms\n", row.ttft_ms,
                      row.tpot_ms, row.tokens_per_s_per_user, row.request_latency_ms);
  text += fmt::format("{:.3f} requests/s per replica, {} replicas on {} GPUs: {:.1f} tokens/s/GPU\n",
                      row.requests_per_s, row.replicas, row.replicas * row.unit_gpus, row.tokens_per_s_per_gpu);
  if (row.mode == ServingMode::disaggregated)
    text += fmt::format("TTFT = the prefill step x {:g} (Algorithm 3's queueing factor) + the KV-cache hand-off, "
                        "{:.2f} ms\n",
                        r.disaggregation.beta_ttft, row.kv_transfer_ms);
  text += fmt::format("memory per GPU{}: {:.1f} GiB = weights {:.1f} + activations {:.1f} + reserve {:.1f} + KV cache "
                      "{:.1f} ({} sequences; room for {})\n",
                      row.mode == ServingMode::disaggregated ? " (decode worker)" : "", row.memory_gib,
                      m.weight_bytes / kGiB, m.activation_bytes / kGiB, m.reserve_bytes / kGiB,
                      row.batch * m.kv_bytes_per_sequence / kGiB, row.batch, int(std::floor(m.max_sequences())));
  text += fmt::format("SLA {}: {}\nsources: {}\n\n", sla_text(r), row.meets_sla ? "met" : sla_misses(row, r),
                      perf::source_names(row.sources));
  return text;
}

nlohmann::json
to_json(const EstimateRun& run) {
  const PlanRequest& r = run.request;
  nlohmann::json steps = nlohmann::json::array();
  for (const PricedStep& step : run.steps) {
    nlohmann::json parts = nlohmann::json::object();
    for (std::size_t part = 0; part < perf::kStepParts; ++part)
      parts[perf::step_part_name(perf::StepPart(part))] = {
          {"us", step.parts.parts[part].us}, {"sources", perf::source_names(step.parts.parts[part].sources)}};
    const perf::Estimate total = step.parts.total();
    steps.push_back({{"step", step.name},
                     {"worker", step.worker},
                     {"shape",
                      {{"prefill_requests", step.shape.prefill_requests},
                       {"prefill_tokens", step.shape.prefill_tokens},
                       {"prefix", step.shape.prefix},
                       {"decode_requests", step.shape.decode_requests},
                       {"kv_len", step.shape.kv_len},
                       {"tokens_per_decode", step.shape.tokens_per_decode}}},
                     {"parts", parts},
                     {"total_us", total.us},
                     {"sources", perf::source_names(total.sources)}});
  }
  const perf::MemoryBudget& m = run.memory;
  return {{"model", r.model.name},
          {"system", {{"name", run.system.name}, {"gpu", run.system.gpu_name}, {"gpus", r.gpus}}},
          {"workload", {{"isl", r.workload.isl}, {"osl", r.workload.osl}, {"prefix", r.workload.prefix}}},
          {"engine", perf::engine_name(r.engine)},
          {"precision", precision_json(r.precision)},
          {"perf_database", run.perf_db_directory.empty() ? nlohmann::json() : nlohmann::json(run.perf_db_directory)},
          {"configuration", row_json(run.row, r)},
          {"steps", steps},
          {"memory_per_gpu_gib",
           {{"weights", m.weight_bytes / kGiB},
            {"activations", m.activation_bytes / kGiB},
            {"reserve", m.reserve_bytes / kGiB},
            {"kv_cache", run.row.batch * m.kv_bytes_per_sequence / kGiB},
            {"kv_cache_sequences_max", m.max_sequences()},
            {"capacity", m.capacity_bytes / kGiB}}}};
}

} // namespace optkit::plan
