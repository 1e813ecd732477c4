// Plan's speed-of-light fallback fitted to published measurements (`optkit plan calibrate`): the
// efficiencies (GEMM, prefill and decode attention, memory, communication) and per-kernel overhead
// that minimise the mean |ln(predicted / published)| over every figure of the points file
// (published_points.hpp), found by coordinate descent on a fixed grid, so the same points always
// give the same efficiencies. profiles/systems/*.yaml carry the fit, and estimates made with it are
// labelled `calibrated` instead of `roofline`.
#pragma once

#include "archive/run_context.hpp"
#include "core/table.hpp"
#include "perf/system_spec.hpp"
#include "plan/published_points.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace optkit::plan {

struct EfficiencyFit {
  perf::DefaultEfficiency before, after;
  std::vector<PointComparison> before_rows, after_rows; // on the fallback alone
  // With the fitted efficiencies, as `plan` prices each point: with the system's measured perf
  // database where it has one (elsewhere the same as after_rows).
  std::vector<PointComparison> plan_rows;
};

// Starts from `start` and fits the five efficiencies and the per-kernel overhead.
EfficiencyFit fit_efficiencies(PublishedPoints& points, const perf::DefaultEfficiency& start);

// `optkit plan calibrate`: loads the points (default: the bundled
// profiles/calibration/published.yaml), fits from the built-in defaults, and archives the errors
// before and after as metrics of the context's run.
struct EfficiencyFitRun {
  PublishedPoints points;
  EfficiencyFit fit;
};
EfficiencyFitRun run_efficiency_fit(const std::string& points_file, const archive::RunContext& context);

// The mean absolute percentage error of each set's figures, before and after the fit.
struct SetError {
  PointSet set;
  std::size_t figures = 0;
  double before = 0, after = 0, plan = 0;
};
std::vector<SetError> set_errors(const EfficiencyFitRun& run);

nlohmann::json to_json(const EfficiencyFitRun& run);
Table efficiency_fit_table(const EfficiencyFitRun& run);
// Below the table: each set's error and all figures' error, before and after, then efficiency_yaml.
std::string efficiency_fit_summary(const EfficiencyFitRun& run);
// The fitted efficiencies as the `efficiency:` block of a system YAML.
std::string efficiency_yaml(const EfficiencyFitRun& run);

} // namespace optkit::plan
