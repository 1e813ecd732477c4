#include "hetero/hetero_run.hpp"

#include "hetero/stage_layouts.hpp"
#include "hetero/uniform_baselines.hpp"

#include "core/error.hpp"
#include "core/resource_paths.hpp"
#include "core/text.hpp"
#include "hetero/layer_statistics.hpp"
#include "hetero/variance_indicator.hpp"
#include "model/calibration_documents.hpp"
#include "perf/estimate.hpp"
#include "perf/model_arch.hpp"
#include "perf/system_spec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>

namespace optkit::hetero {

std::string
bits_text(const std::vector<int>& bits, int first, int end) {
  std::string text;
  for (int l = first; l < end;) {
    int run_end = l;
    while (run_end < end && bits[std::size_t(run_end)] == bits[std::size_t(l)])
      ++run_end;
    text += fmt::format("{}{}×{}", text.empty() ? "" : ", ", bits[std::size_t(l)], run_end - l);
    l = run_end;
  }
  return text;
}

std::vector<int>
parse_bit_list(const std::string& text, const std::string& flag) {
  std::vector<int> bits;
  for (const auto& field : split(text, ',')) {
    int value = 0;
    const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
    if (field.empty() || ec != std::errc() || end != field.data() + field.size())
      throw InputError(flag + " '" + text + "': expected bitwidths such as 3,4,8,16");
    bits.push_back(value);
  }
  return bits;
}

HeteroRun
run_hetero(const HeteroRunOptions& o, const archive::RunContext& context) {
  if (o.cluster.empty())
    throw InputError("--cluster FILE is required (a YAML of device groups; see man optkit-plan)");
  if (o.model.empty())
    throw InputError("--model is required: a preset (optkit plan --list-models) or a config.json / folder");
  if (o.workload.isl < 1 || o.workload.osl < 1 || o.workload.batch < 1)
    throw InputError("--isl, --osl and --batch must be at least 1");
  for (const int b : o.planner.bits)
    if (b != 3 && b != 4 && b != 8 && b != 16)
      throw InputError(fmt::format("--bits {}: the bitwidths are 3, 4, 8 and 16", b));
  if (o.planner.theta < 0)
    throw InputError("--theta must be at least 0");
  if (o.solver != "ilp" && o.solver != "heuristic")
    throw InputError("--solver " + o.solver + ": ilp or heuristic");
  if (o.planner.time_limit_s <= 0)
    throw InputError("--time-limit must be positive (seconds)");
  if (o.indicator != "variance" && o.indicator != "hessian")
    throw InputError("--indicator " + o.indicator + ": variance or hessian");
  if (o.indicator == "hessian" && o.calib.empty())
    throw InputError("--indicator hessian needs activations: give --calib FILE with --model a model folder");
  if (!o.calib.empty() && !std::filesystem::is_directory(o.model))
    throw InputError(
        fmt::format("--calib needs --model to be a model folder with safetensors weights, not '{}'", o.model));
  if (o.calib_samples < 1 || o.calib_length < 8)
    throw InputError("--calib-samples must be at least 1 and --calib-length at least 8 tokens");

  const auto data = find_data_directory();
  const ClusterSpec cluster =
      load_cluster(resolve_bundled_yaml(o.cluster, data.path / "profiles" / "clusters", "--cluster", "cluster"),
                   data.path / "profiles");
  const perf::ModelArch model = perf::resolve_model(o.model);
  std::map<std::string, std::unique_ptr<perf::PerfDatabase>> owned;
  std::map<std::string, const perf::PerfDatabase*> databases;
  for (const auto& g : cluster.groups) {
    if (owned.contains(g.gpu))
      continue;
    const auto dir = data.path / "profiles" / "perf" / g.system.name;
    auto db = std::make_unique<perf::PerfDatabase>(g.system);
    if (std::filesystem::is_directory(dir))
      *db = perf::PerfDatabase::load(dir, g.system);
    databases[g.gpu] = db.get();
    owned[g.gpu] = std::move(db);
  }
  const LayerCosts costs(model, cluster, databases, o.workload);

  HeteroRun run;
  run.model_name = model.name;
  run.cluster_name = cluster.name;
  run.workload = o.workload;
  run.workload_profile = o.workload_profile;
  run.bits = o.planner.bits;
  std::sort(run.bits.begin(), run.bits.end());
  run.bits.erase(std::unique(run.bits.begin(), run.bits.end()), run.bits.end());
  run.theta = o.planner.theta;
  std::vector<std::vector<double>> omega;
  if (o.calib.empty()) {
    const auto indicator_started = std::chrono::steady_clock::now();
    omega = variance_indicator(shape_only_statistics(model), run.bits);
    run.indicator_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - indicator_started).count();
    run.indicator_source = "shape-only";
  } else {
    auto documents = model::read_calibration_documents(o.calib, o.model, o.calib_length);
    if (documents.size() > std::size_t(o.calib_samples))
      documents.resize(std::size_t(o.calib_samples));
    const bool hessian = o.indicator == "hessian";
    const MeasuredStatistics measured =
        measure_layer_statistics(o.model, documents, {.bits = run.bits, .hessian = hessian, .threads = o.threads});
    if (measured.layers.size() != std::size_t(model.layers))
      throw InputError(fmt::format("--model {}: the weights hold {} decoder layers, config.json says {}", o.model,
                                   measured.layers.size(), model.layers));
    omega = hessian ? measured.hessian_omega : variance_indicator(measured.layers, run.bits);
    run.variance_seconds = measured.variance_seconds;
    run.hessian_seconds = measured.hessian_seconds;
    run.forward_seconds = measured.forward_seconds;
    run.calibration_tokens = measured.tokens;
    run.indicator_seconds = hessian ? measured.hessian_seconds : measured.variance_seconds;
    run.indicator_source = fmt::format("{} ({} calibration tokens of {})", o.indicator, measured.tokens,
                                       std::filesystem::path(o.calib).filename().string());
  }
  HeteroOptions planner = o.planner;
  planner.bits = run.bits;
  planner.use_ilp = o.solver == "ilp";
  run.plan = plan_hetero(costs, cluster, omega, planner);
  run.baselines = uniform_baselines(costs, cluster, run.plan.group_size, planner.bits, omega,
                                    planner.decode_micro_batch, planner.prefill_micro_batches);

  if (context.recording()) {
    auto& a = *context.archive;
    const auto& p = run.plan;
    a.transaction([&] {
      a.add_metric(context.run_id, std::nullopt, {"latency", p.latency_s, "s", {}});
      a.add_metric(context.run_id, std::nullopt, {"throughput", p.throughput_tokens_per_s, "tokens/s", {}});
      a.add_metric(context.run_id, std::nullopt, {"indicator", p.indicator, "", {}});
      a.add_metric(context.run_id, std::nullopt, {"objective", p.objective, "", {}});
      a.add_metric(context.run_id, std::nullopt, {"optimality_gap", p.gap, "", {}});
      a.add_metric(context.run_id, std::nullopt, {"solve_time", p.heuristic_seconds + p.ilp_seconds, "s", {}});
      a.add_metric(context.run_id, std::nullopt, {"indicator_time", run.indicator_seconds, "s", {}});
      if (run.calibration_tokens > 0)
        a.add_metric(context.run_id, std::nullopt, {"calibration_pass_time", run.forward_seconds, "s", {}});
    });
  }
  return run;
}

namespace {

nlohmann::json
baselines_json(const HeteroRun& run) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& b : run.baselines)
    rows.push_back({{"topology", topology_name(b.topology)},
                    {"bits", b.bits},
                    {"fits", b.fits},
                    {"layout", b.fits ? nlohmann::json(b.layout) : nlohmann::json()},
                    {"latency_s", b.fits ? nlohmann::json(b.latency_s) : nlohmann::json()},
                    {"throughput_tokens_per_s", b.fits ? nlohmann::json(b.throughput_tokens_per_s) : nlohmann::json()},
                    {"indicator", b.indicator}});
  return rows;
}

} // namespace

nlohmann::json
to_json(const HeteroRun& run) {
  const auto& p = run.plan;
  nlohmann::json stages = nlohmann::json::array();
  std::vector<std::string> order;
  for (const auto& s : p.stages) {
    order.push_back(s.gpu);
    std::vector<int> bits(p.layer_bits.begin() + s.first_layer, p.layer_bits.begin() + s.end_layer);
    stages.push_back({{"gpu", s.gpu},
                      {"gpus", s.tp},
                      {"tp", s.tp},
                      {"node", s.node},
                      {"layers", {s.first_layer, s.end_layer}},
                      {"bits", bits},
                      {"memory_bytes", s.memory_bytes},
                      {"capacity_bytes", s.capacity_bytes},
                      {"prefill_s", s.prefill_s},
                      {"decode_s", s.decode_s},
                      {"sources", perf::source_names(s.sources)}});
  }
  return {{"model", run.model_name},
          {"cluster", run.cluster_name},
          {"workload",
           {{"isl", run.workload.isl},
            {"osl", run.workload.osl},
            {"batch", run.workload.batch},
            {"profile", run.workload_profile.empty() ? nlohmann::json() : nlohmann::json(run.workload_profile)}}},
          {"bits", run.bits},
          {"theta", run.theta},
          {"device_order", order},
          {"prefill_micro_batch", p.prefill_micro_batch},
          {"decode_micro_batch", p.decode_micro_batch},
          {"layer_bits", p.layer_bits},
          {"stages", stages},
          {"predicted", {{"latency_s", p.latency_s}, {"throughput_tokens_per_s", p.throughput_tokens_per_s}}},
          {"indicator",
           {{"total", p.indicator},
            {"source", run.indicator_source},
            {"seconds", run.indicator_seconds},
            {"variance_seconds", run.variance_seconds},
            {"hessian_seconds", run.hessian_seconds},
            {"calibration_pass_seconds", run.forward_seconds},
            {"calibration_tokens", run.calibration_tokens}}},
          {"objective", p.objective},
          {"uniform_baselines", baselines_json(run)},
          {"solver",
           {{"method", p.method},
            {"proven_optimal", p.proven_optimal},
            {"gap", p.gap},
            {"group_size", p.group_size},
            {"candidates", p.candidates},
            {"ilp_solves", p.ilp_solves},
            {"heuristic_objective", p.heuristic_objective},
            {"heuristic_seconds", p.heuristic_seconds},
            {"ilp_seconds", p.ilp_seconds}}}};
}

Table
stage_table(const HeteroRun& run) {
  Table t({"stage", "gpu", "tp", "node", "layers", "bits", "memory_gib", "capacity_gib", "prefill_ms", "decode_ms",
           "sources"});
  const auto& p = run.plan;
  for (std::size_t j = 0; j < p.stages.size(); ++j) {
    const auto& s = p.stages[j];
    t.add_row({static_cast<int>(j), s.gpu, s.tp, s.node, fmt::format("{}-{}", s.first_layer, s.end_layer - 1),
               bits_text(p.layer_bits, s.first_layer, s.end_layer), std::round(s.memory_bytes / perf::kGiB * 10) / 10,
               std::round(s.capacity_bytes / perf::kGiB * 10) / 10, s.prefill_s * 1e3, s.decode_s * 1e3,
               perf::source_names(s.sources)});
  }
  return t;
}

Table
baseline_table(const HeteroRun& run) {
  Table t({"scheme", "topology", "bits", "layout", "tokens_per_s", "vs_plan", "indicator"});
  const double planned = run.plan.throughput_tokens_per_s;
  const auto rounded = [](double v) { return std::round(v * 1000) / 1000; };
  t.add_row({"mixed (plan)", "-", "mixed", layout_of_plan(run.plan), std::round(planned * 10) / 10, 1.0,
             rounded(run.plan.indicator)});
  for (const auto& b : run.baselines) {
    if (!b.fits) {
      t.add_row({"uniform", topology_name(b.topology), b.bits, "none fits", nullptr, nullptr, rounded(b.indicator)});
      continue;
    }
    t.add_row({"uniform", topology_name(b.topology), b.bits, b.layout, std::round(b.throughput_tokens_per_s * 10) / 10,
               std::round(b.throughput_tokens_per_s / planned * 100) / 100, rounded(b.indicator)});
  }
  return t;
}

std::string
layout_of_plan(const HeteroPlan& plan) {
  std::vector<GpuStage> stages;
  for (const auto& s : plan.stages)
    stages.push_back({s.gpu, s.tp});
  return topology_text(stages);
}

} // namespace optkit::hetero
