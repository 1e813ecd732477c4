// `optkit tune` as a library call: resolve the space, the optimizer and the evaluator, run the
// study with every trial archived as a trial row of the run (config, outcome, metrics), and
// report the winner with its launch command. A study is a run: `resume` names an earlier run
// whose options are reused and whose completed trials are taken over, so the same proposals
// continue where it stopped.
#pragma once

#include "archive/run_context.hpp"
#include "core/table.hpp"
#include "tune/objective.hpp"
#include "tune/optimizer.hpp"
#include "tune/study.hpp"

#include <map>
#include <string>
#include <vector>

namespace optkit::tune {

struct TuneOptions {
  std::string engine = "sim"; // sim | optkit | vllm | sglang | trtllm
  // Live engines: what they serve and how they start.
  std::string model;
  std::string engine_executable;
  std::vector<std::string> engine_args;
  double engine_timeout_s = 900;
  // Live measurement: bench's profile and trial sizes.
  std::string profile = "chat-small";
  std::string tokenizer;
  double bench_min_trial_s = 10;
  int bench_max_trials = 8;
  double beta_tolerance = 0.02;
  double max_dispatch_lag_ms = 5;
  std::size_t goodput_requests = 200;
  std::string space; // bundled name or file
  std::string optimizer = "tpe";
  int trials = 30;
  std::uint64_t seed = 0;
  std::string objective = "goodput";
  double lambda = 5.0;
  std::map<std::string, double> hw_cost{{"concurrency", 0.01}, {"max_num_seqs", 0.01}, {"speculative_tokens", 0.02}};
  std::vector<std::string> slos; // certified objective (bench syntax); goodput: the sim setup's slo_s unless set
  std::optional<double> slo_s;   // goodput: p99 target override
  std::string sim = "tinyllama-l40s";
  // --prior SETUP: before the live trials, a simulated TPE study of `prior_trials` on that setup;
  // its `prior_top` best feasible configurations are measured first (multi-fidelity warm start).
  std::string prior;
  int prior_trials = 200;
  int prior_top = 3;
  TpeOptions tpe;
  HillClimbOptions hillclimb;
  std::size_t grid_points = 5;
  int top_k = 3;
  int replicates = 2;
  bool baseline = true;
  std::string executor = "local"; // local | slurm
  int slots = 1;                  // trials at once (local threads or engines; Slurm jobs queued)
  std::vector<std::string> gpus;  // local: device ids shared out among the slots
  std::string partition;          // slurm
  std::vector<std::string> sbatch_args;
  std::string resume; // run id or "last" of an interrupted study
  std::string svg_dir;
  std::string emit; // write the winner's launch command here
};

nlohmann::json to_json(const TuneOptions& options);
TuneOptions tune_options_from_json(const nlohmann::json& j);

struct TuneResult {
  TuneOptions options;
  StudyResult study;
  std::string space_name;
  std::string evaluator;    // "sim tinyllama-l40s"
  std::string best_command; // the winner's launch command
  std::int64_t resumed_from = 0;
};

// The simulator's best configurations for the study `options` describe (empty without --prior).
std::vector<nlohmann::json> simulator_prior(const TuneOptions& options, const SearchSpace& space);

// The evaluator `options` describe (the worker side of --executor slurm builds its own from the
// study's archived options).
std::unique_ptr<TrialEvaluator> make_evaluator(const TuneOptions& options, const SearchSpace& space);

// `optkit tune --worker SPEC`: one trial of a study, as a Slurm job runs it.
void tune_worker(const std::filesystem::path& spec_file);

// Throws InputError on bad options (exit 2). A study in which no configuration met the SLO is a
// result, not an exception (the caller maps it to exit 1).
TuneResult run_tune(TuneOptions options, const archive::RunContext& context,
                    const std::function<void(const StudyTrial&)>& on_trial = {});

nlohmann::json to_json(const TuneResult& result);
// A study's result read back from to_json's JSON (as flow reads its children's): what the JSON
// holds, so to_json(tune_result_from_json(j)) == j. InputError naming `source` and the field.
TuneResult tune_result_from_json(const nlohmann::json& j, const std::string& source);
// Measured trials no other beats on both throughput (higher) and p99 latency (lower), each
// configuration once, by p99 — throughput per replica against the latency percentile.
std::vector<const StudyTrial*> pareto_frontier(const StudyResult& study);
Table trials_table(const TuneResult& result);
std::string progress_line(const StudyTrial& trial);
std::string summary_line(const TuneResult& result);

} // namespace optkit::tune
