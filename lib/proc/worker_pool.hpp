// Runs worker tasks as `optkit <command> --worker SPEC.json` child processes, N at a time:
// per-attempt timeouts (SIGTERM to the group, a grace period, then SIGKILL), bounded retries
// with exponential backoff for failures a task marks transient, one log file per attempt
// (archived as an artifact), an optional GPU per child (CUDA_VISIBLE_DEVICES), and a clean stop
// of every child on Ctrl-C/SIGTERM.
#pragma once

#include "core/clock.hpp"
#include "proc/trial_recorder.hpp"
#include "proc/worker_spec.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace optkit::proc {

struct RetryPolicy {
  int max_attempts = 1;
  double backoff_initial_s = 1.0;
  double backoff_factor = 2.0;
  double backoff_max_s = 60.0;
  bool retry_on_signal = false; // a crash (SIGSEGV, SIGKILL by the OOM killer, ...) is transient
  bool retry_on_timeout = false;
  std::vector<int> retry_exit_codes; // exit codes that mean "try again" (e.g. 75, EX_TEMPFAIL)

  // Delay before attempt `next_attempt` (2, 3, ...).
  double backoff_before(int next_attempt) const;
};

struct WorkerTask {
  std::vector<std::string> command;                 // subcommand path of the child, e.g. {"compress"}
  nlohmann::json payload;                           // handed to the child in its spec
  nlohmann::json params = nlohmann::json::object(); // archived as the trial's params
  double timeout_s = 0;                             // per attempt, 0 = none
  double grace_s = 10;                              // SIGTERM → SIGKILL
  RetryPolicy retry;
};

struct WorkerOutcome {
  std::size_t task_index = 0;
  TrialStatus status = TrialStatus::failed;
  int attempts = 0;
  std::optional<int> exit_code;
  std::optional<int> signal;
  nlohmann::json result;     // the child's result (null unless succeeded)
  std::string error;         // why it failed, with the last line of its log
  std::string child_message; // a failed child's own error message ("optkit: error: " removed)
  std::filesystem::path log; // the last attempt's log
  double seconds = 0;        // wall time of the last attempt
  std::int64_t trial_id = 0; // the archive's row of the last attempt (0 without an archive)
  bool succeeded() const { return status == TrialStatus::succeeded; }
  // The child's own message when it left one, else the pool's description of the failure.
  std::string failure_message() const { return child_message.empty() ? error : child_message; }
};

// The one translation of a failed worker into the error its parent command raises: a child that
// exited with the bad-input code reported the user's mistake, which stays an InputError with the
// child's message; anything else is a RuntimeFailure "<what>: <why> (log: <file>)".
[[noreturn]] void throw_worker_failure(const WorkerOutcome& outcome, std::string_view what);

struct PoolOptions {
  std::filesystem::path executable;     // optkit itself
  std::vector<std::string> global_args; // flags placed before the subcommand (--archive, -v ...)
  int slots = 1;                        // concurrent children
  std::vector<int> gpus;                // when set, each child gets one; concurrency ≤ gpus.size()
  TrialRecorder* recorder = nullptr;    // trials, logs and events are recorded here (the run archive)
  std::int64_t run_id = 0;
  std::int64_t first_trial_index = 0; // trial index of tasks[0]; offsets a second pool in the same run
  std::filesystem::path work_dir;     // specs, results and logs: work_dir/trial-N/attempt-M.*
  double poll_interval_s = 0.01;
  const Clock* clock = nullptr; // timeouts, grace periods and backoff; nullptr: the system clock
  bool show_progress = true;
  std::string progress_label = "workers";
  std::function<void(const WorkerOutcome&)> on_finished; // called as each task ends for good
};

class WorkerPool {
public:
  explicit WorkerPool(PoolOptions options);
  // Runs every task to a final outcome (in task order). Throws Interrupted after stopping all
  // children when SIGINT/SIGTERM arrives.
  std::vector<WorkerOutcome> run(const std::vector<WorkerTask>& tasks);

private:
  PoolOptions m_options;
};

} // namespace optkit::proc
