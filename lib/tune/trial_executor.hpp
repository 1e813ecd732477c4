// Where trials run. The study hands an executor jobs and takes back outcomes as they finish:
//   local: in this process (the simulator) or as engine child processes it launches, on up to
//          `slots` at once (one GPU slot each);
//   slurm: every trial an sbatch job running `optkit tune --worker SPEC` on the cluster, polled
//          with scontrol, cancelled with scancel on Ctrl-C; outcomes come back as the worker's
//          result file next to the run's archive (a filesystem both sides share).
#pragma once

#include "tune/trial_evaluator.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace optkit::tune {

struct TrialJob {
  int number = 0;
  StudyPhase phase = StudyPhase::search;
  nlohmann::json config;
  std::uint64_t seed = 0;
};

class TrialExecutor {
public:
  virtual ~TrialExecutor() = default;
  virtual int slots() const = 0;
  virtual void submit(const TrialJob& job) = 0;
  // Blocks until a submitted job ends: its outcome (a crashed or cancelled job is an outcome);
  // nullopt when Ctrl-C arrives first.
  virtual std::optional<std::pair<TrialJob, TrialOutcome>> wait_one() = 0;
  virtual std::size_t in_flight() const = 0;
  // Stops every job still running (Ctrl-C); their outcomes are not reported.
  virtual void cancel_all() = 0;
};

// Runs `evaluator` on up to `slots` threads of this process; each job's directory is
// `directory`/trial-N. `gpus` (device ids) are shared out among the slots, each engine launched
// with its slot's CUDA_VISIBLE_DEVICES. With one slot every job runs inside submit(), in order.
std::unique_ptr<TrialExecutor> make_local_executor(TrialEvaluator& evaluator, int slots,
                                                   std::filesystem::path directory, std::vector<std::string> gpus = {});

struct SlurmOptions {
  int slots = 4;                           // jobs in the queue at once
  std::string partition;                   // empty: the cluster's default
  std::vector<std::string> sbatch_args;    // appended to every sbatch (e.g. --gres=gpu:1, --time=30)
  std::filesystem::path directory;         // shared: specs, results and job logs
  std::vector<std::string> worker_command; // optkit and its global flags; "tune --worker SPEC" follows
  nlohmann::json payload;                  // the study's options, for the worker
  std::string archive;                     // the archive the workers may write to
  std::int64_t run_id = 0;
  double poll_s = 0.5;
};

std::unique_ptr<TrialExecutor> make_slurm_executor(SlurmOptions options);

// The worker side: evaluates the job in `spec_file` and writes its outcome as the result.
void run_trial_worker(const std::filesystem::path& spec_file,
                      const std::function<std::unique_ptr<TrialEvaluator>(const nlohmann::json& options)>& make);

} // namespace optkit::tune
