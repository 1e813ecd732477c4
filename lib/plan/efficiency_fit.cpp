#include "plan/efficiency_fit.hpp"

#include "core/error.hpp"
#include "core/resource_paths.hpp"
#include "core/yaml_schema.hpp"
#include "perf/model_arch.hpp"
#include "perf/perf_database.hpp"
#include "perf/step_model.hpp"
#include "plan/estimators.hpp"

#include <cmath>
#include <fmt/format.h>
#include <map>
#include <memory>

namespace optkit::plan {

namespace {

using config::Field;
using config::Schema;
using config::Type;

Field
number(std::string name, std::string help, double minimum, bool required = false) {
  Field f{std::move(name), Type::number, required, std::move(help)};
  f.minimum = minimum;
  return f;
}

const Schema&
points_schema() {
  static const Schema schema = [] {
    Schema point{"point",
                 {Field{"system", Type::string, true, "a system under profiles/systems"},
                  Field{"model", Type::string, true, "a preset, or a folder under the file's models/"},
                  Field{"precision", Type::string, true, "weights, activations and KV cache: bf16, fp16, fp8, int8"},
                  number("tp", "tensor-parallel GPUs", 1, true),
                  number("batch", "sequences prefilled together and decoded in lock step", 1, true),
                  number("isl", "prompt tokens", 1, true),
                  number("osl", "output tokens (needed with output_tokens_per_s_per_gpu)", 1),
                  number("output_tokens_per_s_per_gpu", "published output throughput per GPU", 0),
                  number("ttft_ms", "published first-token latency, ms", 0)}};
    Field points{"points", Type::list, true, "the published figures"};
    points.item = std::make_shared<const Field>(
        Field{"point", Type::object, true, "one static batch", {}, {}, {}, std::make_shared<const Schema>(point)});
    return Schema{"published points",
                  {Field{"name", Type::string, true, "what these points are"},
                   Field{"source", Type::string, true, "where they were published"}, points}};
  }();
  return schema;
}

perf::ModelArch
resolve_point_model(const PublishedPoints& points, const std::string& model) {
  const auto folder = points.file.parent_path() / "models" / model;
  return perf::resolve_model(std::filesystem::is_directory(folder) ? folder.string() : model);
}

} // namespace

PublishedPoints
load_published_points(const std::filesystem::path& file, const std::filesystem::path& profiles_dir) {
  const auto doc = config::load_yaml_file(file, points_schema());
  PublishedPoints out;
  out.file = file;
  out.name = doc.at("name").get<std::string>();
  out.source = doc.at("source").get<std::string>();
  std::size_t index = 0;
  for (const auto& p : doc.at("points")) {
    PublishedPoint point;
    point.system = p.at("system").get<std::string>();
    point.model = p.at("model").get<std::string>();
    point.precision = p.at("precision").get<std::string>();
    point.tp = static_cast<int>(p.at("tp").get<double>());
    point.batch = p.at("batch").get<double>();
    point.isl = p.at("isl").get<double>();
    point.osl = p.value("osl", 0.0);
    if (p.contains("output_tokens_per_s_per_gpu"))
      point.output_tokens_per_s_per_gpu = p.at("output_tokens_per_s_per_gpu").get<double>();
    if (p.contains("ttft_ms"))
      point.ttft_ms = p.at("ttft_ms").get<double>();
    const auto where = fmt::format("{}: points[{}]", file.string(), index);
    if (!point.output_tokens_per_s_per_gpu && !point.ttft_ms)
      throw InputError(where + ": give output_tokens_per_s_per_gpu, ttft_ms or both");
    if (point.output_tokens_per_s_per_gpu && point.osl < 2)
      throw InputError(where + ": output_tokens_per_s_per_gpu needs osl of at least 2");
    perf::parse_precision(point.precision, where + ".precision"); // a bad precision fails here
    if (!out.systems.contains(point.system))                      // and an unknown system or model
      out.systems.emplace(point.system, perf::load_system(profiles_dir, point.system));
    if (!out.models.contains(point.model))
      out.models.emplace(point.model, resolve_point_model(out, point.model));
    out.points.push_back(std::move(point));
    ++index;
  }
  return out;
}

std::vector<PointComparison>
compare_with_published(const PublishedPoints& points, const perf::DefaultEfficiency& efficiency) {
  auto systems = points.systems; // each with the candidate efficiencies
  for (auto& [name, system] : systems)
    system.efficiency = efficiency;
  std::vector<PointComparison> rows;
  for (std::size_t i = 0; i < points.points.size(); ++i) {
    const auto& p = points.points[i];
    const auto& system = systems.at(p.system);
    const auto& model = points.models.at(p.model);
    const perf::PerfDatabase fallback_only(system);
    perf::ParallelConfig parallel;
    parallel.tp = p.tp;
    const auto precision = perf::parse_precision(p.precision, "precision");
    const perf::StepModel step(model, system, fallback_only, parallel, {precision, precision, precision}, 0);
    const Workload workload{p.isl, std::max(2.0, p.osl), 0};
    const auto e = estimate_static(step, workload, p.batch, Speculation{});
    if (p.output_tokens_per_s_per_gpu) {
      const double seconds = (e.ttft_ms + (p.osl - 1) * e.tpot_ms) / 1000.0;
      rows.push_back({i, "tokens/s/gpu", *p.output_tokens_per_s_per_gpu, p.batch * p.osl / seconds / p.tp});
    }
    if (p.ttft_ms)
      rows.push_back({i, "ttft_ms", *p.ttft_ms, e.ttft_ms});
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

EfficiencyFit
fit_efficiencies(const PublishedPoints& points, const perf::DefaultEfficiency& start) {
  EfficiencyFit fit;
  fit.before = start;
  fit.before_rows = compare_with_published(points, start);
  struct Axis {
    double perf::DefaultEfficiency::*field;
    double low, high, step;
  };
  // Ranges real kernels span (no efficiency above what tuned libraries reach), so the fit cannot
  // buy accuracy on some points with an implausible figure.
  const Axis axes[] = {{&perf::DefaultEfficiency::gemm, 0.30, 0.90, 0.025},
                       {&perf::DefaultEfficiency::attention, 0.20, 0.80, 0.025},
                       {&perf::DefaultEfficiency::memory, 0.40, 0.95, 0.025},
                       {&perf::DefaultEfficiency::communication, 0.20, 0.90, 0.05},
                       {&perf::DefaultEfficiency::kernel_overhead_us, 0.0, 40.0, 1.0}};
  perf::DefaultEfficiency best = start;
  double best_error = mean_absolute_log_error(fit.before_rows);
  for (int sweep = 0; sweep < 10; ++sweep) {
    bool improved = false;
    for (const auto& axis : axes) {
      const int steps = static_cast<int>(std::lround((axis.high - axis.low) / axis.step));
      for (int k = 0; k <= steps; ++k) {
        perf::DefaultEfficiency candidate = best;
        candidate.*axis.field = axis.low + axis.step * k;
        const double error = mean_absolute_log_error(compare_with_published(points, candidate));
        if (error < best_error - 1e-12) {
          best_error = error;
          best = candidate;
          improved = true;
        }
      }
    }
    if (!improved)
      break;
  }
  fit.after = best;
  fit.after_rows = compare_with_published(points, best);
  return fit;
}

EfficiencyFitRun
run_efficiency_fit(const std::string& points_file, const archive::RunContext& context) {
  const auto profiles = find_data_directory().path / "profiles";
  const std::filesystem::path file =
      points_file.empty() ? profiles / "calibration" / "published.yaml" : std::filesystem::path(points_file);
  EfficiencyFitRun run;
  run.points = load_published_points(file, profiles);
  run.fit = fit_efficiencies(run.points, perf::DefaultEfficiency{});
  run.fit.after.calibrated = points_file.empty() ? "profiles/calibration/published.yaml" : points_file;
  if (context.recording())
    context.archive->transaction([&] {
      context.archive->add_metric(context.run_id, std::nullopt,
                                  {"mape_before", mean_absolute_percentage_error(run.fit.before_rows), "%", {}});
      context.archive->add_metric(context.run_id, std::nullopt,
                                  {"mape_after", mean_absolute_percentage_error(run.fit.after_rows), "%", {}});
    });
  return run;
}

namespace {

nlohmann::json
efficiency_json(const perf::DefaultEfficiency& e) {
  return {{"gemm", e.gemm},
          {"attention", e.attention},
          {"memory", e.memory},
          {"communication", e.communication},
          {"kernel_overhead_us", e.kernel_overhead_us}};
}

} // namespace

nlohmann::json
to_json(const EfficiencyFitRun& run) {
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t i = 0; i < run.fit.after_rows.size(); ++i) {
    const auto& before = run.fit.before_rows[i];
    const auto& after = run.fit.after_rows[i];
    const auto& p = run.points.points[after.point];
    rows.push_back({{"system", p.system},
                    {"model", p.model},
                    {"precision", p.precision},
                    {"tp", p.tp},
                    {"batch", p.batch},
                    {"isl", p.isl},
                    {"osl", p.osl},
                    {"metric", after.metric},
                    {"published", after.published},
                    {"before", before.predicted},
                    {"after", after.predicted}});
  }
  return {
      {"points", run.points.file.string()},
      {"source", run.points.source},
      {"before",
       {{"efficiency", efficiency_json(run.fit.before)},
        {"mape", mean_absolute_percentage_error(run.fit.before_rows)}}},
      {"after",
       {{"efficiency", efficiency_json(run.fit.after)}, {"mape", mean_absolute_percentage_error(run.fit.after_rows)}}},
      {"rows", rows}};
}

Table
efficiency_fit_table(const EfficiencyFitRun& run) {
  Table table({"system", "model", "prec", "tp", "batch", "isl", "osl", "metric", "published", "before", "err_before_%",
               "after", "err_after_%"});
  for (std::size_t i = 0; i < run.fit.after_rows.size(); ++i) {
    const auto& before = run.fit.before_rows[i];
    const auto& after = run.fit.after_rows[i];
    const auto& p = run.points.points[after.point];
    table.add_row({p.system, p.model, p.precision, p.tp, p.batch, p.isl, p.osl, after.metric, after.published,
                   std::round(before.predicted * 10) / 10, std::round(before.relative_error() * 1000) / 10,
                   std::round(after.predicted * 10) / 10, std::round(after.relative_error() * 1000) / 10});
  }
  return table;
}

std::string
efficiency_yaml(const EfficiencyFitRun& run) {
  const auto& e = run.fit.after;
  return fmt::format("efficiency:  # fitted by optkit plan calibrate; used where the perf database has no measurement\n"
                     "  gemm: {:.3f}\n  attention: {:.3f}\n  memory: {:.3f}\n  communication: {:.3f}\n"
                     "  kernel_overhead_us: {:g}\n  calibrated: \"{}\"\n",
                     e.gemm, e.attention, e.memory, e.communication, e.kernel_overhead_us, e.calibrated);
}

} // namespace optkit::plan
