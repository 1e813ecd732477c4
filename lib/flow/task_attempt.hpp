// One attempt of a flow task, wherever it runs: a child process of the flow (local), or a Slurm
// batch job (slurm) on a filesystem the node shares, whose wrapper records the command's exit code
// in the task folder. Either way the command's stdout goes to stdout.json and its stderr to
// log.txt in the task folder, and an attempt destroyed before it ended is stopped (the child's
// process group killed, the job cancelled).
#pragma once

#include "core/clock.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace optkit::flow {

struct AttemptEnd {
  std::optional<int> exit_code; // set when the command exited
  std::optional<int> signal;    // set when a signal killed a local child
  std::string how;              // "exit 3", "SIGKILL", "Slurm job CANCELLED without an exit code"
};

class TaskAttempt {
public:
  virtual ~TaskAttempt() = default;
  // Non-blocking: how the attempt ended, nullopt while it runs.
  virtual std::optional<AttemptEnd> poll() = 0;
};

struct SlurmSettings {
  bool enabled = false;
  std::string partition;
  std::vector<std::string> sbatch_args;
  double poll_s = 0.5; // between scontrol queries of one job
};

// Starts `executable args...` for the task folder `dir` (which exists and is empty).
std::unique_ptr<TaskAttempt> start_attempt(const std::filesystem::path& executable,
                                           const std::vector<std::string>& args, const std::filesystem::path& dir,
                                           const std::string& task_name, const SlurmSettings& slurm);

// A folder left by a flow that was killed may belong to a Slurm job still pending or running:
// cancels it and waits until Slurm reports it ended (scancel only asks; a job still starting would
// otherwise `cd` into the folder's next attempt and truncate its output), at most
// kStaleJobWaitSeconds, then throws RuntimeFailure naming the job. Nothing for local attempts
// (their children die with the flow).
inline constexpr double kStaleJobWaitSeconds = 300;
void stop_stale_attempt(const std::filesystem::path& dir, const Clock& clock);

} // namespace optkit::flow
