#include "plan/efficiency_fit.hpp"

#include "core/resource_paths.hpp"

#include <cmath>
#include <fmt/format.h>
#include <map>

namespace optkit::plan {

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
                       {&perf::DefaultEfficiency::decode_attention, 0.30, 0.95, 0.025},
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
  return {{"gemm", e.gemm},     {"attention", e.attention},         {"decode_attention", e.decode_attention},
          {"memory", e.memory}, {"communication", e.communication}, {"kernel_overhead_us", e.kernel_overhead_us}};
}

} // namespace

std::vector<SetError>
set_errors(const EfficiencyFitRun& run) {
  std::vector<SetError> errors;
  for (std::size_t set = 0; set < run.points.sets.size(); ++set) {
    std::vector<PointComparison> before, after;
    for (std::size_t i = 0; i < run.fit.after_rows.size(); ++i)
      if (run.points.points[run.fit.after_rows[i].point].set == set) {
        before.push_back(run.fit.before_rows[i]);
        after.push_back(run.fit.after_rows[i]);
      }
    errors.push_back({run.points.sets[set], after.size(), mean_absolute_percentage_error(before),
                      mean_absolute_percentage_error(after)});
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
                    {"mode", point_mode_name(p.mode)},
                    {"configuration", describe(p)},
                    {"system", p.system},
                    {"model", p.model},
                    {"precision", p.precision},
                    {"isl", p.isl},
                    {"osl", p.osl},
                    {"metric", after.metric},
                    {"published", after.published},
                    {"before", before.predicted},
                    {"after", after.predicted}});
  }
  nlohmann::json sets = nlohmann::json::array();
  for (const auto& error : set_errors(run))
    sets.push_back({{"name", error.set.name},
                    {"source", error.set.source},
                    {"engine", perf::engine_name(error.set.engine)},
                    {"figures", error.figures},
                    {"mape_before", error.before},
                    {"mape_after", error.after}});
  return {
      {"points", run.points.file.string()},
      {"sets", sets},
      {"before",
       {{"efficiency", efficiency_json(run.fit.before)},
        {"mape", mean_absolute_percentage_error(run.fit.before_rows)}}},
      {"after",
       {{"efficiency", efficiency_json(run.fit.after)}, {"mape", mean_absolute_percentage_error(run.fit.after_rows)}}},
      {"rows", rows}};
}

Table
efficiency_fit_table(const EfficiencyFitRun& run) {
  Table table({"system", "model", "prec", "configuration", "isl", "osl", "metric", "published", "before",
               "err_before_%", "after", "err_after_%"});
  for (std::size_t i = 0; i < run.fit.after_rows.size(); ++i) {
    const auto& before = run.fit.before_rows[i];
    const auto& after = run.fit.after_rows[i];
    const auto& p = run.points.points[after.point];
    table.add_row({p.system, p.model, p.precision, describe(p), p.isl, p.osl, after.metric, after.published,
                   std::round(before.predicted * 10) / 10, std::round(before.relative_error() * 1000) / 10,
                   std::round(after.predicted * 10) / 10, std::round(after.relative_error() * 1000) / 10});
  }
  return table;
}

std::string
efficiency_fit_summary(const EfficiencyFitRun& run) {
  std::string text = "\nmean absolute error, with the defaults -> fitted:\n";
  for (const auto& error : set_errors(run))
    text += fmt::format("  {} ({}, {} figures): {:.1f} % -> {:.1f} %\n", error.set.name,
                        perf::engine_name(error.set.engine), error.figures, error.before, error.after);
  text += fmt::format("  all ({} figures): {:.1f} % -> {:.1f} %\n\n{}", run.fit.after_rows.size(),
                      mean_absolute_percentage_error(run.fit.before_rows),
                      mean_absolute_percentage_error(run.fit.after_rows), efficiency_yaml(run));
  return text;
}

std::string
efficiency_yaml(const EfficiencyFitRun& run) {
  const auto& e = run.fit.after;
  return fmt::format("efficiency:  # fitted by optkit plan calibrate; used where the perf database has no measurement\n"
                     "  gemm: {:.3f}\n  attention: {:.3f}\n  decode_attention: {:.3f}\n  memory: {:.3f}\n"
                     "  communication: {:.3f}\n  kernel_overhead_us: {:g}\n  calibrated: \"{}\"\n",
                     e.gemm, e.attention, e.decode_attention, e.memory, e.communication, e.kernel_overhead_us,
                     e.calibrated);
}

} // namespace optkit::plan
