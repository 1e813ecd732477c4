// `optkit plan hetero` as a recorded run: resolves the model, the cluster and each GPU type's
// perf database, computes the indicator, plans, archives the plan's figures, and renders it for
// people (a table of stages) or programs (the JSON plan).
#pragma once

#include "archive/run_context.hpp"
#include "core/table.hpp"
#include "hetero/hetero_planner.hpp"
#include "hetero/uniform_baselines.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace optkit::hetero {

struct HeteroRunOptions {
  std::string cluster; // YAML file, or the name of one under profiles/clusters/
  std::string model;   // preset, config.json or folder
  HeteroWorkload workload;
  std::string workload_profile; // the serving profile ISL and OSL came from, if any
  HeteroOptions planner;
  std::string solver = "ilp"; // ilp | heuristic
  // The indicator from real weights and activations: `model` a folder with safetensors weights and
  // `calib` a calibration file (text or JSONL, as compress reads it); without them, shape-only.
  std::string calib;
  std::int64_t calib_samples = 16;    // the file's first documents used
  std::int64_t calib_length = 512;    // tokens per document at most
  std::string indicator = "variance"; // variance (SplitQuant's) | hessian (λ_max · ‖Q(W) − W‖²)
  unsigned threads = 0;               // the calibration pass (0: one per available CPU)
};

struct HeteroRun {
  std::string model_name;
  std::string cluster_name;
  HeteroWorkload workload;
  std::string workload_profile;
  std::vector<int> bits;
  double theta = 0;
  std::string indicator_source; // "shape-only", or which indicator on how many calibration tokens
  double indicator_seconds = 0; // the indicator's own cost (the variance indicator's, or the Hessian's)
  double variance_seconds = 0;  // measured: the variance indicator's statistics
  double hessian_seconds = 0;   // measured with --indicator hessian: the Hessian indicator's
  double forward_seconds = 0;   // measured: the calibration pass both share
  std::int64_t calibration_tokens = 0;
  HeteroPlan plan;
  std::vector<UniformBaseline> baselines; // Table IV's uniform rows beside the plan
};

// "3,4,8,16" → {3, 4, 8, 16}; InputError naming `flag` for anything that is not a list of integers.
std::vector<int> parse_bit_list(const std::string& text, const std::string& flag);

// InputError naming the flag or file; GoalNotMet when the cluster cannot hold the model.
HeteroRun run_hetero(const HeteroRunOptions& options, const archive::RunContext& context);

nlohmann::json to_json(const HeteroRun& run);
Table stage_table(const HeteroRun& run);
// The plan beside the uniform-precision baselines, each with its throughput as a ratio of the plan's.
Table baseline_table(const HeteroRun& run);
// "TP2+PP2" when every stage is one GPU type at one degree, else each stage: "a100_40g TP2 | v100 TP1".
std::string layout_of_plan(const HeteroPlan& plan);
// Layers [first, end) as runs of one bitwidth in layer order: "16×40, 8×20".
std::string bits_text(const std::vector<int>& bits, int first, int end);

} // namespace optkit::hetero
