// Published serving measurements, and what plan predicts for each (`optkit plan calibrate`). A
// points file (profiles/calibration/published.yaml, or your own) holds sets, each one source and
// the engine it ran; each point is one configuration measured — a system, a model (a preset, or a
// config.json folder under the file's models/), the weights' precision, the KV cache's (default:
// the engine's), ISL and OSL — in one of four modes:
//   static         `batch` prompts prefilled together, then decoded in lock step;
//   agg            `batch` sequences in flight on one TP worker with continuous batching;
//   throughput     an offline maximum-throughput run (trtllm-bench throughput): the worker holds
//                  the largest batch of plan's schedule its KV cache fits;
//   disagg         `prefill` and `decode` pools, each {tp, workers, batch}.
// A point's figures are output tokens/s per GPU, tokens/s per user and/or TTFT. Plan predicts them
// with the search's own functions (price_worker, price_prefill/price_decode, disaggregated_row)
// and the engine's attention kernels, either on the speed-of-light fallback alone (what the fit
// tunes) or as `plan` prices them, with the system's measured perf database where
// profiles/perf/<system> has one.
#pragma once

#include "perf/memory_model.hpp"
#include "perf/model_arch.hpp"
#include "perf/perf_database.hpp"
#include "perf/system_spec.hpp"

#include <array>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace optkit::plan {

enum class PointMode { static_batching, aggregated, throughput, disaggregated };
inline constexpr std::array kPointModes{PointMode::static_batching, PointMode::aggregated, PointMode::throughput,
                                        PointMode::disaggregated};
std::string to_string(PointMode mode); // "static", "agg", "throughput", "disagg"

struct PointPool {
  int tp = 1;
  int workers = 1;
  int batch = 1;
};

struct PublishedPoint {
  std::size_t set = 0; // index into PublishedPoints::sets
  PointMode mode = PointMode::static_batching;
  std::string system;
  std::string model;
  std::string precision; // weights and activations
  std::string kv;        // KV cache ("": the engine's default)
  int tp = 1;
  double batch = 1, isl = 0, osl = 0;
  double ctx_tokens = 0;     // agg/throughput: prompt tokens per mixed step (0: the engine's default)
  PointPool prefill, decode; // disagg
  std::optional<double> output_tokens_per_s_per_gpu;
  std::optional<double> tokens_per_s_per_user;
  std::optional<double> ttft_ms;
};

struct PointSet {
  std::string name;
  std::string source;
  perf::Engine engine = perf::Engine::trtllm;
};

// A system the points run on: its spec, whose efficiencies compare_with_published sets to the
// candidate's, an empty perf database (the fallback alone) and its measured one (empty where none
// was measured); both read the spec's efficiencies where they fall back.
struct PointSystem {
  perf::SystemSpec spec;
  perf::PerfDatabase fallback;
  perf::PerfDatabase measured;
  PointSystem(perf::SystemSpec system, const std::filesystem::path& perf_dir);
};

enum class Pricing { fallback, as_plan };

struct PublishedPoints {
  std::filesystem::path file;
  std::vector<PointSet> sets;
  std::vector<PublishedPoint> points;
  // Every system and model the points name, read once when the file is loaded.
  std::map<std::string, std::unique_ptr<PointSystem>> systems;
  std::map<std::string, perf::ModelArch> models;
};

// InputError with file:line:col for a malformed file, an unknown system, model or precision, and
// naming the point whose configuration plan cannot form (a batch whose KV cache does not fit).
PublishedPoints load_published_points(const std::filesystem::path& file, const std::filesystem::path& profiles_dir);

// The configuration in a line: "static tp2 b1024", "agg tp2 b8", "throughput tp1",
// "disagg 4P(tp1 b1)+2D(tp2 b40)".
std::string describe(const PublishedPoint& point);

struct PointComparison {
  std::size_t point = 0; // index into PublishedPoints::points
  std::string metric;    // "tokens/s/gpu", "tokens/s/user" or "ttft_ms"
  double published = 0;
  double predicted = 0;
  double relative_error() const { return (predicted - published) / published; }
};

// The engines the points' sets ran, by name, each once.
std::vector<std::string> point_engines(const PublishedPoints& points);

// Every figure of every point predicted with `efficiency` in place of each system's own (set on
// `points.systems`), priced as `pricing` says.
std::vector<PointComparison> compare_with_published(PublishedPoints& points, const perf::DefaultEfficiency& efficiency,
                                                    Pricing pricing = Pricing::fallback);
// Whether a system of the points has a measured perf database.
bool has_measured_database(const PublishedPoints& points, const std::string& system);

double mean_absolute_percentage_error(const std::vector<PointComparison>& rows);
double mean_absolute_log_error(const std::vector<PointComparison>& rows);

} // namespace optkit::plan
