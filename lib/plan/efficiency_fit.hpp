// Plan's speed-of-light fallback fitted to published measurements (`optkit plan calibrate`). A points file
// (profiles/calibration/published.yaml, or your own) lists static batches — a system, a model
// (a preset, or a config.json folder under the file's models/), a precision, TP, batch, ISL and
// OSL — with the published output tokens/s per GPU and/or first-token latency. Plan's static
// estimator predicts each on the fallback path alone (no perf database); the fit is the set of
// efficiencies (GEMM, attention, memory, communication) and per-kernel overhead that minimises the mean
// |ln(predicted / published)| over every figure, found by coordinate descent on a fixed grid,
// so the same points always give the same efficiencies. profiles/systems/*.yaml carry the fit,
// and estimates made with it are labelled `calibrated` instead of `roofline`.
#pragma once

#include "archive/run_context.hpp"
#include "core/table.hpp"
#include "perf/model_arch.hpp"
#include "perf/system_spec.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace optkit::plan {

struct PublishedPoint {
  std::string system;
  std::string model;
  std::string precision; // weights, activations and KV cache
  int tp = 1;
  double batch = 1, isl = 0, osl = 0;
  std::optional<double> output_tokens_per_s_per_gpu; // batch · osl / (prefill + decode) / tp
  std::optional<double> ttft_ms;                     // the batch's prefill
};

struct PublishedPoints {
  std::string name;
  std::string source;
  std::filesystem::path file;
  std::vector<PublishedPoint> points;
  // Every system and model the points name, read once when the file is loaded.
  std::map<std::string, perf::SystemSpec> systems;
  std::map<std::string, perf::ModelArch> models;
};

// InputError with file:line:col for a malformed file, an unknown system, model or precision.
PublishedPoints load_published_points(const std::filesystem::path& file, const std::filesystem::path& profiles_dir);

struct PointComparison {
  std::size_t point = 0; // index into PublishedPoints::points
  std::string metric;    // "tokens/s/gpu" or "ttft_ms"
  double published = 0;
  double predicted = 0;
  double relative_error() const { return (predicted - published) / published; }
};

// Every figure of every point predicted with `efficiency` in place of each system's own.
std::vector<PointComparison> compare_with_published(const PublishedPoints& points,
                                                    const perf::DefaultEfficiency& efficiency);

double mean_absolute_percentage_error(const std::vector<PointComparison>& rows);
double mean_absolute_log_error(const std::vector<PointComparison>& rows);

struct EfficiencyFit {
  perf::DefaultEfficiency before, after;
  std::vector<PointComparison> before_rows, after_rows;
};

// Starts from `start` and fits the four efficiencies and the per-kernel overhead.
EfficiencyFit fit_efficiencies(const PublishedPoints& points, const perf::DefaultEfficiency& start);

// `optkit plan calibrate`: loads the points (default: the bundled
// profiles/calibration/published.yaml), fits from the built-in defaults, and archives the errors
// before and after as metrics of the context's run.
struct EfficiencyFitRun {
  PublishedPoints points;
  EfficiencyFit fit;
};
EfficiencyFitRun run_efficiency_fit(const std::string& points_file, const archive::RunContext& context);

nlohmann::json to_json(const EfficiencyFitRun& run);
Table efficiency_fit_table(const EfficiencyFitRun& run);
// The fitted efficiencies as the `efficiency:` block of a system YAML.
std::string efficiency_yaml(const EfficiencyFitRun& run);

} // namespace optkit::plan
