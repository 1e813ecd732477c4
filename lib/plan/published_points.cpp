#include "plan/published_points.hpp"

#include "core/error.hpp"
#include "core/json_fields.hpp"
#include "core/schema_fields.hpp"
#include "core/yaml_schema.hpp"
#include "perf/perf_database.hpp"
#include "perf/step_model.hpp"
#include "plan/estimators.hpp"
#include "plan/search.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <memory>

namespace optkit::plan {

namespace {

using config::Field;
using config::list_field;
using config::number_field;
using config::object_field;
using config::Schema;
using config::Type;

// Prompt tokens one engine step takes by default: TensorRT-LLM's max_num_tokens, and vLLM's
// max-num-batched-tokens on GPUs of 70 GiB and more.
constexpr double kEngineStepTokens = 8192;

Schema
pool_schema(const std::string& name) {
  return Schema{name,
                {number_field("tp", "tensor-parallel GPUs per worker", 1, 64, true),
                 number_field("workers", "workers in the pool", 1, 64, true),
                 number_field("batch", "sequences per worker", 1, 4096, true)}};
}

const Schema&
points_schema() {
  static const Schema schema = [] {
    Field mode{"mode", Type::string, false, "static (default), agg, throughput or disagg"};
    mode.choices = {"static", "agg", "throughput", "disagg"};
    Field kv{"kv", Type::string, false, "KV cache: bf16, fp16, fp8, int8 (default: the engine's)"};
    Schema point{
        "point",
        {mode, Field{"system", Type::string, true, "a system under profiles/systems"},
         Field{"model", Type::string, true, "a preset, or a folder under the file's models/"},
         Field{"precision", Type::string, true, "weights and activations: bf16, fp16, fp8, int8"}, kv,
         number_field("tp", "tensor-parallel GPUs of the worker (static, agg, throughput)", 1, 64),
         number_field("batch", "static: prompts batched together; agg: sequences in flight", 1, 4096),
         number_field("isl", "prompt tokens", 1, 1e7, true), number_field("osl", "output tokens", 1, 1e7),
         number_field("ctx_tokens", "agg, throughput: prompt tokens per step (default 8192)", 1, 1e7),
         object_field("prefill", "disagg: the prefill pool", pool_schema("prefill")),
         object_field("decode", "disagg: the decode pool", pool_schema("decode")),
         number_field("output_tokens_per_s_per_gpu", "published output throughput per GPU", 1e-9, 1e12),
         number_field("output_tokens_per_s", "published output throughput of all the point's GPUs", 1e-9, 1e12),
         number_field("tokens_per_s_per_user", "published generation speed per user (1 / TPOT)", 1e-9, 1e12),
         number_field("ttft_ms", "published first-token latency, ms", 1e-9, 1e12)}};
    Field engine{"engine", Type::string, true, "the engine the set ran: vllm, sglang, trtllm, llamacpp"};
    engine.choices = {"vllm", "sglang", "trtllm", "llamacpp"};
    Schema set{"set",
               {Field{"name", Type::string, true, "what these points are"},
                Field{"source", Type::string, true, "where they were published"}, engine,
                list_field("points", "the published figures",
                           object_field("point", "one measured configuration", point, true), true)}};
    return Schema{"published points",
                  {list_field("sets", "published measurements, one source each",
                              object_field("set", "one source", set, true), true)}};
  }();
  return schema;
}

perf::ModelArch
resolve_point_model(const PublishedPoints& points, const std::string& model) {
  const auto folder = points.file.parent_path() / "models" / model;
  return perf::resolve_model(std::filesystem::is_directory(folder) ? folder.string() : model);
}

PointPool
read_pool(const nlohmann::json& j) {
  return {static_cast<int>(j.at("tp").get<double>()), static_cast<int>(j.at("workers").get<double>()),
          static_cast<int>(j.at("batch").get<double>())};
}

int
point_gpus(const PublishedPoint& p) {
  if (p.mode == PointMode::disaggregated)
    return p.prefill.tp * p.prefill.workers + p.decode.tp * p.decode.workers;
  return p.tp;
}

std::optional<double>
optional_number(const nlohmann::json& j, const char* key) {
  return j.contains(key) ? std::optional<double>(j.at(key).get<double>()) : std::nullopt;
}

PublishedPoint
read_point(const nlohmann::json& p, std::size_t set) {
  PublishedPoint point;
  point.set = set;
  point.mode = enum_named(p.value("mode", "static"), kPointModes).value(); // the schema checked the name
  point.system = p.at("system").get<std::string>();
  point.model = p.at("model").get<std::string>();
  point.precision = p.at("precision").get<std::string>();
  point.kv = p.value("kv", "");
  point.tp = static_cast<int>(p.value("tp", 1.0));
  point.batch = p.value("batch", 0.0);
  point.isl = p.at("isl").get<double>();
  point.osl = p.value("osl", 0.0);
  point.ctx_tokens = p.value("ctx_tokens", 0.0);
  if (p.contains("prefill"))
    point.prefill = read_pool(p.at("prefill"));
  if (p.contains("decode"))
    point.decode = read_pool(p.at("decode"));
  point.output_tokens_per_s_per_gpu = optional_number(p, "output_tokens_per_s_per_gpu");
  if (const auto total = optional_number(p, "output_tokens_per_s"))
    point.output_tokens_per_s_per_gpu = *total / point_gpus(point);
  point.tokens_per_s_per_user = optional_number(p, "tokens_per_s_per_user");
  point.ttft_ms = optional_number(p, "ttft_ms");
  return point;
}

// What each mode needs beyond the schema, named by the point's place in the file.
void
check_point(const nlohmann::json& p, const PublishedPoint& point, const std::string& where) {
  if (!point.output_tokens_per_s_per_gpu && !point.tokens_per_s_per_user && !point.ttft_ms)
    throw InputError(where + ": give output_tokens_per_s_per_gpu (or output_tokens_per_s), tokens_per_s_per_user, "
                             "ttft_ms, or several");
  if (p.contains("output_tokens_per_s") && p.contains("output_tokens_per_s_per_gpu"))
    throw InputError(where + ": give output_tokens_per_s or output_tokens_per_s_per_gpu, not both");
  const bool disagg = point.mode == PointMode::disaggregated;
  if (disagg != (p.contains("prefill") && p.contains("decode")))
    throw InputError(where + (disagg ? ": a disagg point needs prefill and decode pools"
                                     : ": prefill and decode pools belong to disagg points"));
  const bool batched = point.mode == PointMode::static_batching || point.mode == PointMode::aggregated;
  if (batched != p.contains("batch"))
    throw InputError(where + (batched ? ": give the batch" : ": the batch belongs to static and agg points"));
  const bool decodes = point.mode != PointMode::static_batching || point.output_tokens_per_s_per_gpu;
  if (decodes && point.osl < 2)
    throw InputError(where + ": give osl of at least 2 (the figures need decode steps)");
  perf::parse_precision(point.precision, where + ".precision"); // a bad precision fails here
  if (!point.kv.empty())
    perf::parse_precision(point.kv, where + ".kv");
}

PlanRequest
point_request(const PublishedPoints& points, const PublishedPoint& p) {
  PlanRequest r;
  r.model = points.models.at(p.model);
  r.gpus = point_gpus(p);
  r.workload = {p.isl, std::max(2.0, p.osl), 0};
  r.engine = points.sets[p.set].engine;
  r.precision.weights = r.precision.activations = perf::parse_precision(p.precision, "precision");
  r.precision.kv_cache =
      p.kv.empty() ? perf::default_kv_dtype(r.engine, r.precision.weights) : perf::parse_precision(p.kv, "kv");
  r.memory_fraction = perf::default_memory_fraction(r.engine);
  return r;
}

double
step_tokens(const PublishedPoint& p, const PlanRequest& r, int batch) {
  if (p.ctx_tokens > 0)
    return p.ctx_tokens;
  return std::max(prompt_tokens(r), std::min(kEngineStepTokens, batch * prompt_tokens(r)));
}

// The largest batch of plan's schedule whose KV cache the worker holds (0: none).
int
largest_batch(const PublishedPoint& p, const PlanRequest& r, const perf::SystemSpec& system,
              const perf::ParallelConfig& parallel) {
  int largest = 0;
  for (int batch : aggregated_batches()) {
    const WorkerConfiguration c{ServingMode::aggregated, batch, step_tokens(p, r, batch)};
    if (worker_memory(r, system, parallel, c).fits(batch))
      largest = batch;
  }
  return largest;
}

std::string
point_place(const PublishedPoints& points, std::size_t index) {
  const auto& p = points.points[index];
  return fmt::format("{}: {} ({} {} {})", points.file.string(), points.sets[p.set].name, describe(p), p.model,
                     p.system);
}

std::optional<PlanRow>
predict_serving(const PublishedPoints& points, std::size_t index, const PointSystem& priced,
                const perf::PerfDatabase& db) {
  const auto& p = points.points[index];
  const auto& system = priced.spec;
  const PlanRequest r = point_request(points, p);
  const auto step_model = [&](int tp) {
    return std::make_unique<perf::StepModel>(r.model, system, db, perf::ParallelConfig{tp}, r.precision, 0,
                                             r.attention_kernels());
  };
  if (p.mode == PointMode::disaggregated) {
    const auto prefill_model = step_model(p.prefill.tp);
    const auto decode_model = step_model(p.decode.tp);
    const auto prefill = price_prefill(r, system, *prefill_model, p.prefill.batch);
    const auto decode = price_decode(r, system, *decode_model, p.decode.batch);
    if (!prefill || !decode)
      return std::nullopt;
    return disaggregated_row(r, system, *prefill, *decode, {p.prefill.workers, p.decode.workers});
  }
  const auto model = step_model(p.tp);
  const int batch = p.mode == PointMode::throughput ? largest_batch(p, r, system, model->parallel()) : int(p.batch);
  if (batch == 0)
    return std::nullopt;
  const PricedRow row = price_worker(r, system, *model, {ServingMode::aggregated, batch, step_tokens(p, r, batch)});
  return row ? std::optional<PlanRow>(*row) : std::nullopt;
}

void
compare_static(const PublishedPoints& points, std::size_t index, const PointSystem& priced,
               const perf::PerfDatabase& db, std::vector<PointComparison>& rows) {
  const auto& p = points.points[index];
  const PlanRequest r = point_request(points, p);
  const perf::StepModel step(r.model, priced.spec, db, perf::ParallelConfig{p.tp}, r.precision, 0,
                             r.attention_kernels());
  const auto e = estimate_static(step, r.workload, p.batch, Speculation{});
  if (p.output_tokens_per_s_per_gpu) {
    const double seconds = (e.ttft_ms + (p.osl - 1) * e.tpot_ms) / 1000.0;
    rows.push_back({index, "tokens/s/gpu", *p.output_tokens_per_s_per_gpu, p.batch * p.osl / seconds / p.tp});
  }
  if (p.ttft_ms)
    rows.push_back({index, "ttft_ms", *p.ttft_ms, e.ttft_ms});
}

void
compare_serving(const PublishedPoints& points, std::size_t index, const PointSystem& system,
                const perf::PerfDatabase& db, std::vector<PointComparison>& rows) {
  const auto& p = points.points[index];
  const std::optional<PlanRow> row = predict_serving(points, index, system, db);
  if (!row)
    throw InputError(point_place(points, index) +
                     ": plan cannot form this configuration (its KV cache does not fit, or its pools exceed the GPUs)");
  if (p.output_tokens_per_s_per_gpu)
    rows.push_back({index, "tokens/s/gpu", *p.output_tokens_per_s_per_gpu, row->tokens_per_s_per_gpu});
  if (p.tokens_per_s_per_user)
    rows.push_back({index, "tokens/s/user", *p.tokens_per_s_per_user, row->tokens_per_s_per_user});
  if (p.ttft_ms)
    rows.push_back({index, "ttft_ms", *p.ttft_ms, row->ttft_ms});
}

} // namespace

PointSystem::PointSystem(perf::SystemSpec system, const std::filesystem::path& perf_dir)
    : spec(std::move(system))
    , fallback(spec)
    , measured(std::filesystem::is_directory(perf_dir) ? perf::PerfDatabase::load(perf_dir, spec)
                                                       : perf::PerfDatabase(spec)) {}

bool
has_measured_database(const PublishedPoints& points, const std::string& system) {
  const auto found = points.systems.find(system);
  return found != points.systems.end() && found->second->measured.points() > 0;
}

std::string
to_string(PointMode mode) {
  switch (mode) {
  case PointMode::static_batching:
    return "static";
  case PointMode::aggregated:
    return "agg";
  case PointMode::throughput:
    return "throughput";
  case PointMode::disaggregated:
    return "disagg";
  }
  return "?";
}

std::string
describe(const PublishedPoint& p) {
  switch (p.mode) {
  case PointMode::throughput:
    return fmt::format("throughput tp{}", p.tp);
  case PointMode::disaggregated:
    return fmt::format("disagg {}P(tp{} b{})+{}D(tp{} b{})", p.prefill.workers, p.prefill.tp, p.prefill.batch,
                       p.decode.workers, p.decode.tp, p.decode.batch);
  default:
    return fmt::format("{} tp{} b{:g}", to_string(p.mode), p.tp, p.batch);
  }
}

PublishedPoints
load_published_points(const std::filesystem::path& file, const std::filesystem::path& profiles_dir) {
  const auto doc = config::load_yaml_file(file, points_schema());
  PublishedPoints out;
  out.file = file;
  for (const auto& s : doc.at("sets")) {
    const std::size_t set = out.sets.size();
    out.sets.push_back({s.at("name").get<std::string>(), s.at("source").get<std::string>(),
                        perf::parse_engine(s.at("engine").get<std::string>(), "engine")});
    std::size_t index = 0;
    for (const auto& p : s.at("points")) {
      PublishedPoint point = read_point(p, set);
      check_point(p, point, fmt::format("{}: sets[{}].points[{}]", file.string(), set, index++));
      if (!out.systems.contains(point.system)) // an unknown system or model fails here
        out.systems.emplace(point.system, std::make_unique<PointSystem>(perf::load_system(profiles_dir, point.system),
                                                                        profiles_dir / "perf" / point.system));
      if (!out.models.contains(point.model))
        out.models.emplace(point.model, resolve_point_model(out, point.model));
      out.points.push_back(std::move(point));
    }
  }
  return out;
}

std::vector<std::string>
point_engines(const PublishedPoints& points) {
  std::vector<std::string> engines;
  for (const auto& set : points.sets)
    if (std::find(engines.begin(), engines.end(), perf::engine_name(set.engine)) == engines.end())
      engines.push_back(perf::engine_name(set.engine));
  return engines;
}

std::vector<PointComparison>
compare_with_published(PublishedPoints& points, const perf::DefaultEfficiency& efficiency, Pricing pricing) {
  for (auto& [name, system] : points.systems)
    system->spec.efficiency = efficiency;
  std::vector<PointComparison> rows;
  for (std::size_t i = 0; i < points.points.size(); ++i) {
    const auto& system = *points.systems.at(points.points[i].system);
    const auto& db = pricing == Pricing::as_plan ? system.measured : system.fallback;
    if (points.points[i].mode == PointMode::static_batching)
      compare_static(points, i, system, db, rows);
    else
      compare_serving(points, i, system, db, rows);
  }
  return rows;
}

double
mean_absolute_percentage_error(const std::vector<PointComparison>& rows) {
  double sum = 0;
  for (const auto& r : rows)
    sum += std::fabs(r.relative_error());
  return rows.empty() ? 0 : sum / static_cast<double>(rows.size()) * 100;
}

double
mean_absolute_log_error(const std::vector<PointComparison>& rows) {
  double sum = 0;
  for (const auto& r : rows)
    sum += std::fabs(std::log(r.predicted / r.published));
  return rows.empty() ? 0 : sum / static_cast<double>(rows.size());
}

} // namespace optkit::plan
