// A flow job: one YAML file that names the model, the compression recipes and trials, the
// quality gate, the serving profile and SLOs, the tuning studies and the executor — OptiKit's
// Quantization-with-Tuning pipeline (seed 000, §3.1) as data. Paths inside the file are relative
// to the file's own folder; a value without a '/' and without a .yaml/.txt suffix is the name of
// a bundled recipe, suite, profile or space.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace optkit::flow {

struct CompressStage {
  std::vector<std::string> recipes; // names or absolute paths
  int trials = 3;                   // per recipe, seeds seed, seed+1, ...
  std::string calib;                // absolute path ("" when no recipe needs it)
  std::string sampler;              // uniform | length | stratified ("": the recipe's)
  int samples = 32;
  int seq_len = 64;
  std::uint64_t seed = 1;
};

struct GateStage {
  std::string suite; // name or absolute path
  std::string gate;  // absolute path of the gate rules YAML
  int limit = 0;     // documents (0: all)
};

struct BenchStage {
  std::string profile; // name or absolute path
  std::vector<std::string> slos;
  std::vector<std::string> engine_args; // passed to serve-deltas
  double min_trial_seconds = 1;
  double max_trial_seconds = 600; // longest open-loop trial (0: no limit), as bench's flag
  int max_trials = 4;
  double beta_tolerance = 0.3;
  bool baseline = false;          // also certify the uncompressed model, for comparison
  double max_dispatch_lag_ms = 0; // the load generator's p99 lag bound (0: bench's own default)
};

struct TuneStudy {
  bool enabled = false;
  std::string space; // name or absolute path
  std::string optimizer = "tpe";
  int trials = 8;
  std::string objective = "goodput"; // or "certified": OptiKit's Eq. 2 under the job's SLOs
};

struct FlowJob {
  std::filesystem::path source; // the job file
  std::string name;
  std::string model;  // absolute path of the model folder
  std::string output; // absolute path of the output folder
  CompressStage compress;
  GateStage gate;
  BenchStage bench;
  TuneStudy tune_sim;
  TuneStudy tune_live;
  std::vector<std::string> live_engine_args; // serve-deltas flags for live tuning trials
  std::string executor = "local";            // "local": children of the flow; "slurm": one sbatch job per task
  std::string partition;                     // slurm: empty for the cluster's default
  std::vector<std::string> sbatch_args;      // slurm: appended to every sbatch (e.g. --gres=gpu:1)
  int slots = 2;                             // tasks at once (local children, or jobs in the queue)
  int threads = 1; // CPU threads of each child (slots × threads ≤ cores keeps them from starving)
  int retries = 1; // extra attempts of a stage task that crashed (exit 3 or a signal)
};

// Reads a job file, or a job bundled in profiles/flows by name, and validates its schema;
// InputError "file:line:col: ..." on a malformed file.
FlowJob load_flow_job(const std::string& name_or_path);
// The same from the file's text; relative paths resolve against `file`'s folder.
FlowJob parse_flow_job(const std::string& text, const std::filesystem::path& file);

// Checks every reference before anything runs: the model folder, each recipe, the calibration
// file, the suite and gate, each SLO expression, the serving profile, the spaces. InputError
// naming the job file, the key and the value on the first problem.
void validate_flow_job(const FlowJob& job);

nlohmann::json to_json(const FlowJob& job);
// The job as to_json() wrote it (an output folder's job.json); InputError when it is not.
FlowJob flow_job_from_json(const nlohmann::json& j);

} // namespace optkit::flow
