// Slurm's client commands, as optkit's executors use them: submit a command as a batch job
// (sbatch --parsable --wrap), read a job's final state (scontrol; a record that has aged out counts
// as ended), cancel jobs (scancel). The commands are found on PATH; RuntimeFailure names one that
// is missing or fails.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace optkit::proc {

struct BatchJob {
  std::string name;                     // --job-name
  std::string partition;                // empty: the cluster's default
  std::vector<std::string> sbatch_args; // appended (e.g. --gres=gpu:1, --time=30)
  std::filesystem::path log;            // --output: the job's stdout and stderr
  std::string shell_command;            // what --wrap runs (already shell text)
};

// Submits the job; returns its id. `scratch` receives sbatch's own output.
std::string submit_batch_job(const BatchJob& job, const std::filesystem::path& scratch);

// The job's final state (COMPLETED, FAILED, CANCELLED, TIMEOUT, ...), nullopt while it is pending
// or running.
std::optional<std::string> batch_job_final_state(const std::string& id, const std::filesystem::path& scratch);

void cancel_batch_jobs(const std::vector<std::string>& ids, const std::filesystem::path& scratch);

} // namespace optkit::proc
