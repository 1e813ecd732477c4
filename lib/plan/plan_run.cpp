#include "plan/plan_run.hpp"

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/resource_paths.hpp"
#include "core/text.hpp"
#include "plan/launch_generator.hpp"
#include "plan/pareto_plot.hpp"
#include "plan/percentile_selection.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace optkit::plan {

namespace {

// llama-server serves every request of a worker in one process (no prefill/decode pools) and
// reads its weights from a GGUF file, which has no FP8 type.
void
restrict_to_llamacpp(PlanRequest& r) {
  std::erase(r.modes, ServingMode::disaggregated);
  if (r.modes.empty())
    throw InputError("--mode disagg: llama-server has no prefill/decode disaggregation; plan --mode agg or static");
  if (r.precision.weights == perf::Precision::fp8)
    throw InputError("--weight-dtype fp8: a GGUF file has no FP8 weights; plan llama-server with int8 (Q8_0) or "
                     "int4 (Q4_K_M)");
}

// The largest threshold (with its margin) of the rules on `metric`, in ms; infinite when none.
double
slo_threshold_ms(const std::vector<bench::SloRule>& rules, bench::LatencyMetric metric) {
  double threshold = -1;
  for (const auto& rule : rules)
    if (rule.metric == metric)
      threshold = std::max(threshold, rule.threshold_s * (1 + rule.margin) * 1000);
  return threshold < 0 ? std::numeric_limits<double>::infinity() : threshold;
}

// With percentile SLOs (--slo), the rows simulated are those whose means meet the SLOs' thresholds
// (a mean above a p95 bound leaves little hope for the p95), unless --ttft/--tpot/--e2e bound the
// means themselves; a metric no SLO names has no mean bound.
void
bound_means_by_slos(const PlanOptions& o, PlanRequest& r) {
  const auto rules = plan_slos(o.slos);
  if (o.target_rate)
    throw InputError("--target-rate sizes GPUs by the mean model; with --slo, give the rate to check as --rate");
  if (r.speculation.enabled())
    throw InputError("--slo with --spec-tokens: the simulator does not price speculative decoding; drop one");
  if (o.rate && !(*o.rate > 0 && std::isfinite(*o.rate)))
    throw InputError("--rate must be a finite number above 0 requests/s");
  if (o.slo_requests < 200 || o.slo_requests > 100000)
    throw InputError("--slo-requests " + std::to_string(o.slo_requests) + ": use 200 to 100000");
  if (!o.ttft_ms)
    r.ttft_limit_ms = slo_threshold_ms(rules, bench::LatencyMetric::ttft);
  if (!o.tpot_ms && !o.speed && !o.e2e_ms)
    r.tpot_limit_ms = slo_threshold_ms(rules, bench::LatencyMetric::tpot);
  const double e2e = slo_threshold_ms(rules, bench::LatencyMetric::e2e);
  if (!o.e2e_ms && std::isfinite(e2e))
    r.request_latency_limit_ms = e2e;
}

} // namespace

PlanRequest
plan_request(const PlanOptions& o) {
  PlanRequest r;
  r.model = perf::resolve_model(o.model);
  if (o.gpus < 1 || o.gpus > 4096)
    throw InputError("--gpus " + std::to_string(o.gpus) + ": use 1 to 4096");
  r.gpus = o.gpus;
  if (!(o.isl >= 1) || !(o.osl >= 1))
    throw InputError("--isl and --osl must be at least 1 token");
  if (!(o.prefix >= 0) || o.prefix >= o.isl)
    throw InputError("--prefix " + fmt::format("{:g}", o.prefix) + ": must be below --isl");
  r.workload = {o.isl, o.osl, o.prefix};
  if (r.model.max_context > 0 && o.isl + o.osl > r.model.max_context)
    throw InputError(fmt::format("--isl + --osl = {:g} exceeds {}'s context of {} tokens", o.isl + o.osl, r.model.name,
                                 r.model.max_context));
  r.engine = perf::parse_engine(o.engine.value_or(o.emit.empty() ? "vllm" : o.emit), "--engine");
  r.precision.weights = perf::parse_precision(o.weight_dtype, "--weight-dtype");
  r.precision.kv_cache = o.kv_dtype == "auto" ? perf::default_kv_dtype(r.engine, r.precision.weights)
                                              : perf::parse_precision(o.kv_dtype, "--kv-dtype");
  if (r.precision.kv_cache == perf::Precision::int4)
    throw InputError("--kv-dtype int4: KV caches are bf16, fp16, fp8 or int8");
  if (o.activation_dtype.empty()) {
    // W8A8 schemes quantize activations too; int4 is weight-only.
    const perf::Precision w = r.precision.weights;
    r.precision.activations = (w == perf::Precision::fp8 || w == perf::Precision::int8) ? w : perf::Precision::bf16;
  } else {
    r.precision.activations = perf::parse_precision(o.activation_dtype, "--act-dtype");
    if (r.precision.activations == perf::Precision::int4)
      throw InputError("--act-dtype int4: activations are bf16, fp16, fp8 or int8");
  }
  r.memory_fraction = o.memory_fraction.value_or(perf::default_memory_fraction(r.engine));
  if (!(r.memory_fraction > 0 && r.memory_fraction <= 1))
    throw InputError("--memory-fraction must be in (0, 1]");
  r.ttft_limit_ms = o.ttft_ms.value_or(2000);
  r.tpot_limit_ms = o.tpot_ms.value_or(30);
  if (o.speed) {
    if (o.tpot_ms)
      throw InputError("--speed and --tpot both bound the time per output token; give one");
    if (!(*o.speed > 0) || !std::isfinite(*o.speed))
      throw InputError("--speed must be a finite number above 0 tokens/s/user");
    r.tpot_limit_ms = 1000.0 / *o.speed;
  }
  if (!(r.ttft_limit_ms > 0) || !std::isfinite(r.ttft_limit_ms))
    throw InputError("--ttft must be a finite number above 0 ms");
  if (!(r.tpot_limit_ms > 0) || !std::isfinite(r.tpot_limit_ms))
    throw InputError("--tpot must be a finite number above 0 ms");
  if (o.e2e_ms) {
    if (!(*o.e2e_ms > 0) || !std::isfinite(*o.e2e_ms))
      throw InputError("--e2e must be a finite number above 0 ms");
    r.request_latency_limit_ms = *o.e2e_ms;
    // AIConfigurator's --request-latency: the budget bounds TPOT unless --tpot/--speed does. The
    // loosest TPOT any request within it can have is e2e / (OSL − 1) (at TTFT 0); the e2e check
    // itself does the rest.
    if (!o.tpot_ms && !o.speed) {
      r.tpot_limit_ms = *o.e2e_ms / std::max(1.0, r.workload.osl - 1);
      r.tpot_from_request_latency = true;
    }
  }
  r.modes.clear();
  for (const auto& mode : split(o.modes, ','))
    r.modes.push_back(parse_mode(std::string(trim(mode))));
  if (r.engine == perf::Engine::llamacpp)
    restrict_to_llamacpp(r);
  if (o.spec_tokens < 0 || o.spec_tokens > 16)
    throw InputError("--spec-tokens must be 0 to 16");
  if (!(o.spec_acceptance >= 0 && o.spec_acceptance <= 1))
    throw InputError("--spec-acceptance must be in [0, 1]");
  if (!(o.spec_draft_cost >= 0 && o.spec_draft_cost <= 1))
    throw InputError("--spec-draft-cost must be in [0, 1]");
  r.speculation = {o.spec_tokens, o.spec_acceptance, o.spec_draft_cost};
  if (!(o.moe_alpha >= 0 && o.moe_alpha <= 3))
    throw InputError("--moe-alpha must be in [0, 3] (0: balanced routing)");
  r.moe_power_law_alpha = o.moe_alpha;
  if (o.target_rate && !(*o.target_rate > 0))
    throw InputError("--target-rate must be above 0 requests/s");
  r.target_requests_per_s = o.target_rate;
  if (!o.slos.empty())
    bound_means_by_slos(o, r);
  return r;
}

perf::SystemSpec
load_plan_system(const PlanOptions& options) {
  return perf::load_system(find_data_directory().path / "profiles", options.system);
}

perf::PerfDatabase
load_perf_database(const PlanOptions& options, const perf::SystemSpec& system) {
  const std::filesystem::path directory = options.perf_db.empty()
                                              ? find_data_directory().path / "profiles" / "perf" / system.name
                                              : std::filesystem::path(options.perf_db);
  if (!options.perf_db.empty() && !std::filesystem::is_directory(directory))
    throw InputError("--perf-db " + options.perf_db + ": no such directory; give a folder `optkit plan profile` wrote");
  if (!std::filesystem::is_directory(directory))
    return perf::PerfDatabase(system);
  return perf::PerfDatabase::load(directory, system);
}

namespace {

std::string
fmt_ms(double ms) {
  return ms >= 100 ? fmt::format("{:.0f}", ms) : fmt::format("{:.2f}", ms);
}

} // namespace

std::string
sla_text(const PlanRequest& r) {
  std::vector<std::string> terms;
  if (std::isfinite(r.ttft_limit_ms))
    terms.push_back(fmt::format("TTFT <= {:g} ms", r.ttft_limit_ms));
  if (std::isfinite(r.tpot_limit_ms))
    terms.push_back(fmt::format("TPOT <= {:.4g} ms{} ({:.1f} tokens/s/user)", r.tpot_limit_ms,
                                r.tpot_from_request_latency ? " (from --e2e)" : "", 1000.0 / r.tpot_limit_ms));
  if (r.request_latency_limit_ms)
    terms.push_back(fmt::format("request latency <= {:g} ms", *r.request_latency_limit_ms));
  return terms.empty() ? "no mean bound" : join(terms, ", ");
}

std::string
sla_misses(const PlanRow& row, const PlanRequest& r) {
  std::vector<std::string> misses;
  if (row.ttft_ms > r.ttft_limit_ms)
    misses.push_back(fmt::format("TTFT {} ms misses --ttft {:g}", fmt_ms(row.ttft_ms), r.ttft_limit_ms));
  if (row.tpot_ms > r.tpot_limit_ms && !r.tpot_from_request_latency)
    misses.push_back(fmt::format("TPOT {} ms misses --tpot {:g}", fmt_ms(row.tpot_ms), r.tpot_limit_ms));
  if (r.request_latency_limit_ms && row.request_latency_ms > *r.request_latency_limit_ms)
    misses.push_back(fmt::format("request latency {} ms misses --e2e {:g}", fmt_ms(row.request_latency_ms),
                                 *r.request_latency_limit_ms));
  return join(misses, " and ");
}

nlohmann::json
row_json(const PlanRow& row, const PlanRequest& r) {
  const bool moe = r.model.is_moe();
  nlohmann::json j = {
      {"mode", mode_name(row.mode)},
      {"configuration", describe(row, moe)},
      {"parallel", row.parallel.label(moe)},
      {"tp", row.parallel.tp},
      {"pp", row.parallel.pp},
      {"dp", row.parallel.dp},
      {"ep", row.parallel.ep},
      {"batch", row.batch},
      {"replicas", row.replicas},
      {"gpus_per_replica", row.unit_gpus},
      {"gpus_used", row.replicas * row.unit_gpus},
      {"ttft_ms", row.ttft_ms},
      {"tpot_ms", row.tpot_ms},
      {"request_latency_ms", row.request_latency_ms},
      {"tokens_per_s_per_user", row.tokens_per_s_per_user},
      {"tokens_per_s_per_gpu", row.tokens_per_s_per_gpu},
      {"requests_per_s", row.requests_per_s * row.replicas},
      {"memory_gib_per_gpu", row.memory_gib},
      {"meets_sla", row.meets_sla},
      {"sources", perf::source_names(row.sources)},
  };
  if (row.mode == ServingMode::aggregated)
    j["ctx_tokens"] = row.ctx_tokens;
  if (row.mode == ServingMode::disaggregated) {
    j["prefill"] = {{"workers", row.prefill_workers},
                    {"parallel", row.prefill_parallel.label(moe)},
                    {"tp", row.prefill_parallel.tp},
                    {"pp", row.prefill_parallel.pp},
                    {"batch", row.prefill_batch}};
    j["decode"] = {{"workers", row.decode_workers}, {"parallel", row.parallel.label(moe)}, {"batch", row.batch}};
    j["kv_transfer_ms"] = row.kv_transfer_ms;
  }
  return j;
}

namespace {

const PlanRow&
chosen_row(const PlanRun& run) {
  if (run.result.target)
    return run.result.rows[run.result.target->row];
  return run.result.rows[*run.result.best];
}

void
archive_plan_metrics(const PlanRun& run, const archive::RunContext& context) {
  if (!context.recording())
    return;
  const PlanResult& result = run.result;
  auto& archive = *context.archive;
  archive.transaction([&] {
    archive.add_metric(context.run_id, std::nullopt, {"evaluations", double(result.evaluations), "configs", {}});
    archive.add_metric(context.run_id, std::nullopt, {"search_time", result.seconds, "s", {}});
    archive.add_metric(context.run_id, std::nullopt,
                       {"memory_infeasible", double(result.memory_infeasible), "configs", {}});
    if (result.best) {
      const PlanRow& best = result.rows[*result.best];
      archive.add_metric(context.run_id, std::nullopt,
                         {"tokens_per_s_per_gpu", best.tokens_per_s_per_gpu, "tokens/s", {}});
      archive.add_metric(context.run_id, std::nullopt,
                         {"tokens_per_s_per_user", best.tokens_per_s_per_user, "tokens/s", {}});
      archive.add_metric(context.run_id, std::nullopt, {"ttft", best.ttft_ms, "ms", {}});
      archive.add_metric(context.run_id, std::nullopt, {"tpot", best.tpot_ms, "ms", {}});
    }
    if (!run.tails.empty() && result.best) {
      const RowTail& best = run.tails.front();
      archive.add_metric(context.run_id, std::nullopt, {"slo_rate", best.at_capacity.rate, "requests/s", {}});
      archive.add_metric(context.run_id, std::nullopt, {"e2e_p95", best.at_capacity.e2e.p95, "ms", {}});
    }
    if (result.target)
      archive.add_metric(context.run_id, std::nullopt, {"target_rate_gpus", double(result.target->gpus), "gpus", {}});
  });
}

std::vector<std::string>
slo_texts(const TailOptions& options) {
  std::vector<std::string> texts;
  for (const auto& rule : options.slos)
    texts.push_back(rule.text);
  return texts;
}

std::string
tail_slos_text(const TailOptions& options) {
  return join(slo_texts(options), ", ");
}

// GoalNotMet when nothing fits, or nothing meets the SLA (naming the closest and what it misses).
void
throw_unless_planned(const PlanRun& run) {
  const PlanResult& result = run.result;
  const PlanRequest& r = run.request;
  if (result.rows.empty())
    throw GoalNotMet(fmt::format("no configuration of {} fits {} x {} ({:g} GiB each) with ISL {:g} + OSL {:g}; add "
                                 "GPUs, lower --weight-dtype/--kv-dtype, or shorten the sequences",
                                 r.model.name, r.gpus, run.system.name, run.system.memory_gib, r.workload.isl,
                                 r.workload.osl));
  if (result.best)
    return;
  if (!run.tail_options.slos.empty()) {
    if (run.tails.empty())
      throw GoalNotMet(fmt::format("no configuration's means meet {} (the bounds --slo {} sets), so none was "
                                   "simulated; closest: {} with {}",
                                   sla_text(r), tail_slos_text(run.tail_options),
                                   describe(result.rows[*result.closest], r.model.is_moe()),
                                   sla_misses(result.rows[*result.closest], r)));
    const RowTail& closest = run.tails.front();
    const TailLatencies& shown = closest.at_rate && !closest.at_rate->meets() ? *closest.at_rate : closest.at_capacity;
    throw GoalNotMet(fmt::format("no configuration meets --slo {} under Poisson arrivals ({} simulated); closest: {} "
                                 "with {} at {:.3g} requests/s",
                                 tail_slos_text(run.tail_options), run.tails.size(),
                                 describe(result.rows[closest.row], r.model.is_moe()), join(shown.misses, ", "),
                                 shown.rate));
  }
  const PlanRow& closest = result.rows[*result.closest];
  throw GoalNotMet(fmt::format("no configuration meets {}; closest: {} with {}", sla_text(r),
                               describe(closest, r.model.is_moe()), sla_misses(closest, r)));
}

// --slo: the rows meeting the mean bounds simulated and judged by their percentiles (options
// already checked by plan_request).
void
judge_tails(const PlanOptions& options, const perf::PerfDatabase& db, PlanRun& run) {
  run.tail_options = {plan_slos(options.slos), options.rate, options.slo_requests, 1};
  run.tails = judge_percentile_slas(run.request, run.system, db, run.result, run.tail_options);
}

nlohmann::json
latencies_json(const TailLatencies& t) {
  const auto p = [](const Percentiles& v) {
    return nlohmann::json{{"p50", v.p50}, {"p95", v.p95}, {"p99", v.p99}, {"mean", v.mean}};
  };
  return {{"requests_per_s", t.rate}, {"ttft_ms", p(t.ttft)}, {"tpot_ms", p(t.tpot)},
          {"e2e_ms", p(t.e2e)},       {"meets", t.meets()},   {"misses", t.misses}};
}

nlohmann::json
tails_json(const PlanRun& run) {
  nlohmann::json rows = nlohmann::json::array();
  for (const RowTail& tail : run.tails) {
    nlohmann::json j = {{"configuration", row_json(run.result.rows[tail.row], run.request)},
                        {"capacity", latencies_json(tail.at_capacity)},
                        {"capacity_is_lower_bound", tail.capacity_is_lower_bound},
                        {"tokens_per_s_per_gpu", tail.tokens_per_s_per_gpu},
                        {"meets", run.result.rows[tail.row].meets_sla}};
    if (tail.at_rate)
      j["at_rate"] = latencies_json(*tail.at_rate);
    rows.push_back(j);
  }
  return {{"slos", slo_texts(run.tail_options)},
          {"arrivals", "poisson"},
          {"rate", run.tail_options.rate ? nlohmann::json(*run.tail_options.rate) : nlohmann::json()},
          {"requests", run.tail_options.requests},
          {"rows", rows}};
}

} // namespace

std::string
model_listing() {
  std::string out;
  for (const auto& name : perf::model_presets()) {
    const auto m = perf::resolve_model(name);
    out += fmt::format(
        "{:<18} {} layers, hidden {}, {} heads ({} KV){}\n", name, m.layers, m.hidden, m.heads, m.kv_heads,
        m.experts > 0 ? fmt::format(", MoE {} experts ({} active)", m.experts, m.experts_per_token) : std::string());
  }
  return out + "\nor a Hugging Face config.json / model folder: --model DIR\n";
}

std::string
system_listing() {
  const auto profiles = find_data_directory().path / "profiles";
  std::string out;
  for (const auto& name : perf::list_systems(profiles)) {
    const auto s = perf::load_system(profiles, name);
    out += fmt::format("{:<10} {} {:.0f} GiB, {:.0f} GB/s{}\n", name, s.gpu_name, s.memory_gib, s.memory_bandwidth_gbs,
                       std::filesystem::is_directory(profiles / "perf" / name) ? ", measured perf database" : "");
  }
  return out + "\nor your own: --system FILE.yaml\n";
}

PlanRun
run_plan(const PlanOptions& options, const archive::RunContext& context) {
  PlanRun run;
  run.request = plan_request(options);
  run.system = load_plan_system(options);
  const perf::PerfDatabase db = load_perf_database(options, run.system);
  if (!db.directory().empty()) {
    run.perf_db_directory = db.directory().string();
    run.perf_db_points = db.points();
  }
  if (!options.emit.empty())
    perf::parse_engine(options.emit, "--emit");
  run.model_reference =
      std::filesystem::exists(options.model) ? options.model : preset_repository(run.request.model.name);

  run.result = search(run.request, run.system, db);
  if (!options.slos.empty() && !run.result.rows.empty())
    judge_tails(options, db, run);
  archive_plan_metrics(run, context);
  throw_unless_planned(run);
  const PlanResult& result = run.result;
  const std::string title = fmt::format("{} on {} x {}, ISL {:g} / OSL {:g}", run.request.model.name, run.request.gpus,
                                        run.system.name, run.request.workload.isl, run.request.workload.osl);
  if (!options.plot.empty()) {
    write_file_atomic(options.plot, pareto_svg(result, run.request, title));
    if (context.recording())
      context.archive->add_artifact(context.run_id, std::nullopt, options.plot, "plot");
  }
  if (!options.bench_profile.empty()) {
    LaunchContext launch{run.model_reference, run.system.name, &run.request, run.request.engine};
    write_file_atomic(options.bench_profile, bench_profile_yaml(chosen_row(run), launch, context.run_id));
    if (context.recording())
      context.archive->add_artifact(context.run_id, std::nullopt, options.bench_profile, "bench-profile");
  }
  return run;
}

Table
pareto_table(const PlanRun& run) {
  Table table({"mode", "configuration", "gpus", "batch", "ttft_ms", "tpot_ms", "tok/s/user", "tok/s/gpu", "req/s",
               "mem_gib", "sla", "sources"});
  const auto& rows = run.result.rows;
  std::vector<std::size_t> shown = run.result.pareto;
  if (run.result.best && std::find(shown.begin(), shown.end(), *run.result.best) == shown.end())
    shown.push_back(*run.result.best);
  for (std::size_t i : shown) {
    const PlanRow& row = rows[i];
    const bool chosen = run.result.best && i == *run.result.best;
    table.add_row({mode_name(row.mode) + (chosen ? "*" : ""), describe(row, run.request.model.is_moe()),
                   row.replicas * row.unit_gpus, row.batch, std::round(row.ttft_ms * 10) / 10,
                   std::round(row.tpot_ms * 100) / 100, std::round(row.tokens_per_s_per_user * 10) / 10,
                   std::round(row.tokens_per_s_per_gpu * 10) / 10,
                   std::round(row.requests_per_s * row.replicas * 100) / 100, std::round(row.memory_gib * 10) / 10,
                   row.meets_sla ? "yes" : "no", perf::source_names(row.sources)});
  }
  return table;
}

nlohmann::json
precision_json(const perf::ServingPrecision& precision) {
  return {{"weights", perf::precision_name(precision.weights)},
          {"activations", perf::precision_name(precision.activations)},
          {"kv_cache", perf::precision_name(precision.kv_cache)}};
}

nlohmann::json
to_json(const PlanRun& run) {
  const PlanRequest& r = run.request;
  const PlanResult& result = run.result;
  nlohmann::json out;
  out["model"] = {{"name", r.model.name},
                  {"architecture", r.model.architecture},
                  {"parameters", r.model.total_parameters()},
                  {"active_parameters", r.model.active_parameters()}};
  out["system"] = {{"name", run.system.name}, {"gpu", run.system.gpu_name}, {"gpus", r.gpus}};
  out["workload"] = {{"isl", r.workload.isl}, {"osl", r.workload.osl}, {"prefix", r.workload.prefix}};
  out["sla"] = {
      {"ttft_ms", r.ttft_limit_ms},
      {"tpot_ms", r.tpot_limit_ms},
      {"e2e_ms", r.request_latency_limit_ms ? nlohmann::json(*r.request_latency_limit_ms) : nlohmann::json()}};
  out["engine"] = perf::engine_name(r.engine);
  out["precision"] = precision_json(r.precision);
  out["perf_database"] = {
      {"directory", run.perf_db_directory.empty() ? nlohmann::json() : nlohmann::json(run.perf_db_directory)},
      {"points", run.perf_db_points}};
  out["search"] = {{"evaluations", result.evaluations},
                   {"memory_infeasible", result.memory_infeasible},
                   {"worker_layouts", result.worker_layouts},
                   {"feasible", result.rows.size()},
                   {"seconds", result.seconds}};
  out["best"] = result.best ? row_json(result.rows[*result.best], r) : nlohmann::json();
  nlohmann::json pareto = nlohmann::json::array();
  for (std::size_t i : result.pareto)
    pareto.push_back(row_json(result.rows[i], r));
  out["pareto"] = pareto;
  if (!run.tails.empty())
    out["percentile_sla"] = tails_json(run);
  if (result.target) {
    auto target = row_json(result.rows[result.target->row], r);
    out["target_rate"] = {{"requests_per_s", *r.target_requests_per_s},
                          {"gpus", result.target->gpus},
                          {"replicas", result.target->replicas},
                          {"configuration", target}};
  }
  return out;
}

Table
tail_table(const PlanRun& run) {
  const bool at_rate = run.tail_options.rate.has_value();
  std::vector<std::string> columns = {"configuration", "slo_req/s", "tok/s/gpu", "ttft_p50", "ttft_p95", "ttft_p99",
                                      "tpot_p50",      "tpot_p95",  "tpot_p99",  "e2e_p50",  "e2e_p95",  "e2e_p99"};
  if (at_rate)
    columns.insert(columns.end(), {"at_rate", "misses_at_rate"});
  Table table(columns);
  const auto ms = [](double v) { return std::round(v * 10) / 10; };
  for (const RowTail& tail : run.tails) {
    const TailLatencies& c = tail.at_capacity;
    const bool held = c.meets();
    std::vector<nlohmann::json> cells = {
        describe(run.result.rows[tail.row], run.request.model.is_moe()),
        held ? nlohmann::json((tail.capacity_is_lower_bound ? ">=" : "") + fmt::format("{:.3g}", c.rate))
             : nlohmann::json("none"),
        std::round(tail.tokens_per_s_per_gpu * 10) / 10,
        ms(c.ttft.p50),
        ms(c.ttft.p95),
        ms(c.ttft.p99),
        ms(c.tpot.p50),
        ms(c.tpot.p95),
        ms(c.tpot.p99),
        ms(c.e2e.p50),
        ms(c.e2e.p95),
        ms(c.e2e.p99)};
    if (at_rate) {
      cells.push_back(tail.at_rate->meets() ? "meets" : "misses");
      cells.push_back(join(tail.at_rate->misses, "; "));
    }
    table.add_row(std::move(cells));
  }
  return table;
}

std::string
plan_summary(const PlanRun& run) {
  const PlanRequest& r = run.request;
  const PlanResult& result = run.result;
  std::string text =
      fmt::format("{} on {} x {} ({}), ISL {:g} / OSL {:g}, engine {}, SLA {}\n", r.model.name, r.gpus, run.system.name,
                  run.system.gpu_name, r.workload.isl, r.workload.osl, perf::engine_name(r.engine), sla_text(r));
  text += fmt::format("searched {} configurations ({} dropped: out of memory) in {:.3f} s; perf data: {}\n",
                      result.evaluations, result.memory_infeasible, result.seconds,
                      run.perf_db_directory.empty()
                          ? std::string("none (roofline)")
                          : fmt::format("{} ({} points)", run.perf_db_directory, run.perf_db_points));
  const PlanRow& best = result.rows[*result.best];
  text += fmt::format("best: {} — {:.1f} tokens/s/GPU at {:.1f} tokens/s/user, TTFT {} ms, TPOT {} ms\n",
                      describe(best, r.model.is_moe()), best.tokens_per_s_per_gpu, best.tokens_per_s_per_user,
                      fmt_ms(best.ttft_ms), fmt_ms(best.tpot_ms));
  if (!run.tails.empty()) {
    const RowTail& tail = run.tails.front();
    text += fmt::format(
        "percentile SLA --slo {}: {} rows meeting the mean bounds simulated ({} Poisson requests each{}); "
        "best serves {}{:.3g} requests/s ({:.1f} tokens/s/GPU) with TTFT p95 {:.0f} ms, TPOT p95 {:.1f} "
        "ms, E2E p95 {:.0f} ms (latencies below at each row's highest such rate, in ms)\n",
        tail_slos_text(run.tail_options), run.tails.size(), run.tail_options.requests,
        run.tail_options.rate ? fmt::format(", checked at {:g} requests/s", *run.tail_options.rate) : std::string(),
        tail.capacity_is_lower_bound ? "at least " : "", tail.at_capacity.rate, tail.tokens_per_s_per_gpu,
        tail.at_capacity.ttft.p95, tail.at_capacity.tpot.p95, tail.at_capacity.e2e.p95);
  }
  if (result.target) {
    const PlanRow& row = result.rows[result.target->row];
    text += fmt::format("target {:g} req/s: {} GPUs as {} x [{}]\n", *r.target_requests_per_s, result.target->gpus,
                        result.target->replicas, describe(row, r.model.is_moe()));
  }
  return text;
}

std::string
emit_launch(const PlanRun& run, const std::string& engine) {
  LaunchContext launch{run.model_reference, run.system.name, &run.request, perf::parse_engine(engine, "--emit")};
  PlanRow row = chosen_row(run);
  if (run.result.target)
    row.replicas = run.result.target->replicas;
  return launch_script(row, launch);
}

} // namespace optkit::plan
