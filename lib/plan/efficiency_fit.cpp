#include "plan/efficiency_fit.hpp"

#include "core/resource_paths.hpp"

#include <cmath>
#include <fmt/format.h>
#include <functional>
#include <map>

namespace optkit::plan {

namespace {

// One fitted figure: where it lives in the efficiencies, and the range real kernels span (no
// efficiency above what tuned libraries reach), so the fit cannot buy accuracy on some points
// with an implausible figure.
struct Axis {
  std::function<double&(perf::DefaultEfficiency&)> field;
  double low, high, step;
};

std::vector<Axis>
fitted_axes(const PublishedPoints& points) {
  using E = perf::DefaultEfficiency;
  std::vector<Axis> axes = {{[](E& e) -> double& { return e.gemm; }, 0.30, 0.90, 0.025},
                            {[](E& e) -> double& { return e.memory; }, 0.40, 0.95, 0.025},
                            {[](E& e) -> double& { return e.communication; }, 0.20, 0.90, 0.05},
                            {[](E& e) -> double& { return e.kernel_overhead_us; }, 0.0, 40.0, 1.0}};
  // Attention runs in each engine's own kernels: one pair per engine the points name.
  for (const auto& engine : point_engines(points)) {
    axes.push_back({[engine](E& e) -> double& { return e.engine_attention[engine].prefill; }, 0.20, 0.80, 0.025});
    axes.push_back({[engine](E& e) -> double& { return e.engine_attention[engine].decode; }, 0.30, 0.95, 0.025});
  }
  return axes;
}

// Coordinate descent over the axes' grids, from `start`, on the mean |ln(predicted / published)|.
perf::DefaultEfficiency
descend(PublishedPoints& points, const std::vector<Axis>& axes, perf::DefaultEfficiency best, double best_error) {
  for (int sweep = 0; sweep < 10; ++sweep) {
    bool improved = false;
    for (const auto& axis : axes) {
      const int steps = static_cast<int>(std::lround((axis.high - axis.low) / axis.step));
      for (int k = 0; k <= steps; ++k) {
        perf::DefaultEfficiency candidate = best;
        axis.field(candidate) = axis.low + axis.step * k;
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
  return best;
}

// Engines without published points, and optkit's own kernels where the perf database has no
// attention table, take the fitted engines' mean.
void
set_generic_attention(perf::DefaultEfficiency& e) {
  if (e.engine_attention.empty())
    return;
  double prefill = 0, decode = 0;
  for (const auto& [engine, kernels] : e.engine_attention) {
    prefill += kernels.prefill;
    decode += kernels.decode;
  }
  const auto engines = static_cast<double>(e.engine_attention.size());
  e.attention = std::round(prefill / engines * 1000) / 1000;
  e.decode_attention = std::round(decode / engines * 1000) / 1000;
}

} // namespace

EfficiencyFit
fit_efficiencies(PublishedPoints& points, const perf::DefaultEfficiency& start) {
  EfficiencyFit fit;
  fit.before = start;
  for (const auto& engine : point_engines(points)) // each engine starts from the generic figures
    fit.before.engine_attention.emplace(engine, start.attention_of(engine));
  fit.before_rows = compare_with_published(points, fit.before);
  fit.after = descend(points, fitted_axes(points), fit.before, mean_absolute_log_error(fit.before_rows));
  set_generic_attention(fit.after);
  fit.after_rows = compare_with_published(points, fit.after);
  fit.plan_rows = compare_with_published(points, fit.after, Pricing::as_plan);
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
      context.archive->add_metric(context.run_id, std::nullopt,
                                  {"mape_plan", mean_absolute_percentage_error(run.fit.plan_rows), "%", {}});
    });
  return run;
}

namespace {

nlohmann::json
efficiency_json(const perf::DefaultEfficiency& e) {
  nlohmann::json engines = nlohmann::json::object();
  for (const auto& [engine, kernels] : e.engine_attention)
    engines[engine] = {{"prefill", kernels.prefill}, {"decode", kernels.decode}};
  return {{"gemm", e.gemm},
          {"attention", e.attention},
          {"decode_attention", e.decode_attention},
          {"memory", e.memory},
          {"communication", e.communication},
          {"kernel_overhead_us", e.kernel_overhead_us},
          {"engine_attention", engines}};
}

} // namespace

std::vector<SetError>
set_errors(const EfficiencyFitRun& run) {
  std::vector<SetError> errors;
  for (std::size_t set = 0; set < run.points.sets.size(); ++set) {
    std::vector<PointComparison> before, after, plan;
    for (std::size_t i = 0; i < run.fit.after_rows.size(); ++i)
      if (run.points.points[run.fit.after_rows[i].point].set == set) {
        before.push_back(run.fit.before_rows[i]);
        after.push_back(run.fit.after_rows[i]);
        plan.push_back(run.fit.plan_rows[i]);
      }
    errors.push_back({run.points.sets[set], after.size(), mean_absolute_percentage_error(before),
                      mean_absolute_percentage_error(after), mean_absolute_percentage_error(plan)});
  }
  return errors;
}

nlohmann::json
to_json(const EfficiencyFitRun& run) {
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t i = 0; i < run.fit.after_rows.size(); ++i) {
    const auto& before = run.fit.before_rows[i];
    const auto& after = run.fit.after_rows[i];
    const auto& p = run.points.points[after.point];
    rows.push_back({{"set", run.points.sets[p.set].name},
                    {"mode", to_string(p.mode)},
                    {"configuration", describe(p)},
                    {"system", p.system},
                    {"model", p.model},
                    {"precision", p.precision},
                    {"isl", p.isl},
                    {"osl", p.osl},
                    {"metric", after.metric},
                    {"published", after.published},
                    {"before", before.predicted},
                    {"after", after.predicted},
                    {"plan", run.fit.plan_rows[i].predicted}});
  }
  nlohmann::json sets = nlohmann::json::array();
  for (const auto& error : set_errors(run))
    sets.push_back({{"name", error.set.name},
                    {"source", error.set.source},
                    {"engine", perf::engine_name(error.set.engine)},
                    {"figures", error.figures},
                    {"mape_before", error.before},
                    {"mape_after", error.after},
                    {"mape_plan", error.plan}});
  return {
      {"points", run.points.file.string()},
      {"sets", sets},
      {"before",
       {{"efficiency", efficiency_json(run.fit.before)},
        {"mape", mean_absolute_percentage_error(run.fit.before_rows)}}},
      {"after",
       {{"efficiency", efficiency_json(run.fit.after)}, {"mape", mean_absolute_percentage_error(run.fit.after_rows)}}},
      {"plan", {{"mape", mean_absolute_percentage_error(run.fit.plan_rows)}}},
      {"rows", rows}};
}

Table
efficiency_fit_table(const EfficiencyFitRun& run) {
  Table table({"system", "model", "prec", "configuration", "isl", "osl", "metric", "published", "before",
               "err_before_%", "after", "err_after_%", "plan", "err_plan_%"});
  for (std::size_t i = 0; i < run.fit.after_rows.size(); ++i) {
    const auto& before = run.fit.before_rows[i];
    const auto& after = run.fit.after_rows[i];
    const auto& p = run.points.points[after.point];
    table.add_row({p.system, p.model, p.precision, describe(p), p.isl, p.osl, after.metric, after.published,
                   std::round(before.predicted * 10) / 10, std::round(before.relative_error() * 1000) / 10,
                   std::round(after.predicted * 10) / 10, std::round(after.relative_error() * 1000) / 10,
                   std::round(run.fit.plan_rows[i].predicted * 10) / 10,
                   std::round(run.fit.plan_rows[i].relative_error() * 1000) / 10});
  }
  return table;
}

std::string
efficiency_fit_summary(const EfficiencyFitRun& run) {
  std::string text = "\nmean absolute error, the fallback with the defaults -> fitted; as plan prices them (with "
                     "the measured perf databases):\n";
  for (const auto& error : set_errors(run))
    text += fmt::format("  {} ({}, {} figures): {:.1f} % -> {:.1f} %; plan {:.1f} %\n", error.set.name,
                        perf::engine_name(error.set.engine), error.figures, error.before, error.after, error.plan);
  text += fmt::format("  all ({} figures): {:.1f} % -> {:.1f} %; plan {:.1f} %\n\n{}", run.fit.after_rows.size(),
                      mean_absolute_percentage_error(run.fit.before_rows),
                      mean_absolute_percentage_error(run.fit.after_rows),
                      mean_absolute_percentage_error(run.fit.plan_rows), efficiency_yaml(run));
  return text;
}

std::string
efficiency_yaml(const EfficiencyFitRun& run) {
  const auto& e = run.fit.after;
  std::string yaml =
      fmt::format("efficiency:  # fitted by optkit plan calibrate; used where the perf database has no measurement\n"
                  "  gemm: {:.3f}\n  attention: {:.3f}\n  decode_attention: {:.3f}\n  memory: {:.3f}\n"
                  "  communication: {:.3f}\n  kernel_overhead_us: {:g}\n",
                  e.gemm, e.attention, e.decode_attention, e.memory, e.communication, e.kernel_overhead_us);
  if (!e.engine_attention.empty())
    yaml += "  engine_attention:\n";
  for (const auto& [engine, kernels] : e.engine_attention)
    yaml += fmt::format("    {}: {{prefill: {:.3f}, decode: {:.3f}}}\n", engine, kernels.prefill, kernels.decode);
  return yaml + fmt::format("  calibrated: \"{}\"\n", e.calibrated);
}

} // namespace optkit::plan
