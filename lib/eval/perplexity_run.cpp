#include "eval/perplexity_run.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "model/memory_needs.hpp"
#include "model/model_config.hpp"
#include "model/model_folder.hpp"
#include "model/weight_store.hpp"
#include "proc/worker_pool.hpp"
#include "quant/delta_format.hpp"

#include <fmt/format.h>

namespace optkit::eval {

namespace {

void
archive_metrics(archive::RunArchive& archive, std::int64_t run_id, const PerplexityResult& r) {
  std::vector<archive::NewMetric> rows = {{"perplexity", r.perplexity, "", {}},
                                          {"perplexity_stderr", r.perplexity_stderr, "", {}},
                                          {"bits_per_byte", r.bits_per_byte, "bit/B", {}},
                                          {"nll_mean", r.nll_mean, "nat", {}},
                                          {"scored_tokens", static_cast<double>(r.scored_tokens), "tokens", {}},
                                          {"text_tokens", static_cast<double>(r.text_tokens), "tokens", {}},
                                          {"eval_seconds", r.seconds, "s", {}},
                                          {"eval_tokens_per_second", r.tokens_per_second, "tokens/s", {}}};
  if (r.kl) {
    const auto& k = *r.kl;
    rows.insert(rows.end(), {{"kl_mean", k.kl_mean, "nat", {}},
                             {"kl_max", k.kl_max, "nat", {}},
                             {"top1_agreement", k.top1_agreement, "", {}},
                             {"delta_p_mean", k.delta_p_mean, "", {}},
                             {"delta_p_p01", k.delta_p_p01, "", {}},
                             {"delta_p_p99", k.delta_p_p99, "", {}},
                             {"base_perplexity", k.base_perplexity, "", {}}});
  }
  archive.transaction([&] {
    for (const auto& metric : rows)
      archive.add_metric(run_id, std::nullopt, metric);
  });
}

} // namespace

nlohmann::json
to_json(const PerplexityOptions& o) {
  nlohmann::json j = {{"model", o.model.string()},
                      {"data", o.data.string()},
                      {"ctx", o.ctx},
                      {"stride", o.stride},
                      {"threads", o.threads},
                      {"max_windows", o.max_windows},
                      {"activations", runtime::activation_precision_name(o.activations)},
                      {"no_mmap", o.weights == model::LoadMode::read}};
  if (o.kl_base)
    j["kl_base"] = o.kl_base->string();
  if (o.delta)
    j["delta"] = o.delta->string();
  return j;
}

PerplexityOptions
perplexity_options_from_json(const nlohmann::json& j) {
  PerplexityOptions o;
  o.model = j.at("model").get<std::string>();
  o.data = j.at("data").get<std::string>();
  o.ctx = j.at("ctx").get<std::int64_t>();
  o.stride = j.at("stride").get<std::int64_t>();
  o.threads = j.at("threads").get<unsigned>();
  o.max_windows = j.at("max_windows").get<std::int64_t>();
  o.activations = runtime::parse_activation_precision(j.value("activations", "fp32"), "activations");
  o.weights = j.value("no_mmap", false) ? model::LoadMode::read : model::LoadMode::map;
  if (j.contains("kl_base"))
    o.kl_base = j["kl_base"].get<std::string>();
  if (j.contains("delta"))
    o.delta = j["delta"].get<std::string>();
  return o;
}

PerplexityResult
measure_perplexity_in_worker(const PerplexityOptions& options, const archive::RunContext& context,
                             std::int64_t trial_index) {
  model::check_model_folder(options.model, "--model");
  if (options.kl_base)
    model::check_model_folder(*options.kl_base, "--kl-base");
  if (options.delta)
    quant::read_delta_config(*options.delta); // the child reads the tensors
  if (!std::filesystem::is_regular_file(options.data))
    throw InputError(fmt::format("--data {}: no such file", options.data.string()));
  proc::WorkerTask task;
  task.command = {"eval", "perplexity"};
  task.payload = to_json(options);
  task.params = task.payload;
  task.timeout_s = context.timeout_s;
  auto pool = archive::pool_options(context, "perplexity");
  pool.first_trial_index = trial_index;
  const auto outcome = proc::WorkerPool(pool).run({task}).front();
  if (!outcome.succeeded())
    proc::throw_worker_failure(outcome, "perplexity worker failed");
  return perplexity_result_from_json(outcome.result);
}

namespace {

// Refuses a --max-memory the run cannot keep: every model it maps (the model, a delta, a KL base),
// one window's activations and its KV cache (fp32 keys and values).
void
check_memory_budget(const PerplexityOptions& options) {
  if (!options.max_memory)
    return;
  const auto config = model::load_model_config(options.model);
  std::uint64_t weights = model::WeightStore(options.model).file_bytes();
  if (options.kl_base)
    weights += model::WeightStore(*options.kl_base).file_bytes();
  if (options.delta) // a delta is merged on load: the variant's weights exist beside the base's
    weights *= 2;
  const auto kv = 2 * static_cast<std::uint64_t>(config.num_layers * config.kv_dim() * options.ctx) * sizeof(float);
  const auto needs = model::run_memory_needs(config, weights, options.ctx, kv);
  if (needs.total() > *options.max_memory)
    throw InputError(fmt::format("--max-memory {}: eval perplexity needs {}; lower --ctx or raise --max-memory",
                                 model::gigabytes(*options.max_memory), needs.describe()));
}

} // namespace

PerplexityResult
run_perplexity(const PerplexityOptions& options, const archive::RunContext& context) {
  check_memory_budget(options);
  const auto result = measure_perplexity_in_worker(options, context, 0);
  archive_metrics(*context.archive, context.run_id, result);
  return result;
}

void
perplexity_worker(const proc::WorkerSpec& spec) {
  const auto options = perplexity_options_from_json(spec.payload);
  const auto result = measure_perplexity(
      options, [](std::int64_t done, std::int64_t total) { log::info("perplexity: {}/{} windows", done, total); });
  proc::write_worker_result(spec, to_json(result));
}

Table
perplexity_table(const PerplexityResult& r) {
  Table table({"metric", "value", "unit"});
  table.add_row({"perplexity", fmt::format("{:.4f} ± {:.4f}", r.perplexity, r.perplexity_stderr), ""});
  table.add_row({"bits per byte", fmt::format("{:.4f}", r.bits_per_byte), "bit/B"});
  table.add_row({"scored tokens", fmt::format("{}", r.scored_tokens), fmt::format("of {}", r.text_tokens)});
  if (r.kl) {
    const auto& k = *r.kl;
    table.add_row({"base perplexity", fmt::format("{:.4f}", k.base_perplexity), ""});
    table.add_row({"KL(base || model) mean", fmt::format("{:.6f} ± {:.6f}", k.kl_mean, k.kl_stderr), "nat"});
    table.add_row({"KL max", fmt::format("{:.6f}", k.kl_max), "nat"});
    table.add_row({"top-1 agreement", fmt::format("{:.2f}", 100.0 * k.top1_agreement), "%"});
    table.add_row({"Δp mean", fmt::format("{:+.3f}", 100.0 * k.delta_p_mean), "%"});
    table.add_row(
        {"Δp p01 / p05 / p50 / p95 / p99",
         fmt::format("{:+.2f} / {:+.2f} / {:+.2f} / {:+.2f} / {:+.2f}", 100.0 * k.delta_p_p01, 100.0 * k.delta_p_p05,
                     100.0 * k.delta_p_p50, 100.0 * k.delta_p_p95, 100.0 * k.delta_p_p99),
         "%"});
  }
  table.add_row({"time", fmt::format("{:.1f}", r.seconds), "s"});
  table.add_row({"throughput", fmt::format("{:.0f}", r.tokens_per_second), "tokens/s"});
  return table;
}

} // namespace optkit::eval
