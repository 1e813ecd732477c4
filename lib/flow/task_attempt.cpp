#include "flow/task_attempt.hpp"

#include "core/atomic_file.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "proc/child_process.hpp"
#include "proc/slurm_jobs.hpp"

#include <fmt/format.h>

#include <fstream>
#include <map>

namespace optkit::flow {

namespace fs = std::filesystem;

namespace {

class LocalAttempt final : public TaskAttempt {
public:
  LocalAttempt(const fs::path& executable, const std::vector<std::string>& args, const fs::path& dir)
      : m_child(executable, args, dir / "stdout.json", dir / "log.txt", std::map<std::string, std::string>{}) {}

  std::optional<AttemptEnd> poll() override {
    const auto status = m_child.poll();
    if (!status)
      return std::nullopt;
    return AttemptEnd{status->exit_code, status->signal, proc::describe(*status)};
  }

private:
  proc::ChildProcess m_child; // killed with its group if destroyed while running
};

class SlurmAttempt final : public TaskAttempt {
public:
  SlurmAttempt(const fs::path& executable, const std::vector<std::string>& args, const fs::path& dir,
               const std::string& task_name, const SlurmSettings& settings)
      : m_dir(dir), m_poll_s(settings.poll_s) {
    std::string command = shell_quote(executable.string());
    for (const auto& a : args)
      command += " " + shell_quote(a);
    const std::string q = shell_quote(dir.string());
    // The exit code lands in the folder atomically; a job killed before it has none.
    const std::string wrap = fmt::format("cd {} && {{ {} >stdout.json 2>log.txt; echo $? >exit_code.tmp && mv "
                                         "exit_code.tmp exit_code; }}",
                                         q, command);
    m_id = proc::submit_batch_job(
        {"optkit-flow-" + task_name, settings.partition, settings.sbatch_args, dir / "slurm.log", wrap},
        dir / "sbatch.txt");
    write_file_atomic(dir / "slurm_job", m_id + "\n");
  }
  ~SlurmAttempt() override {
    if (!m_ended) {
      try {
        proc::cancel_batch_jobs({m_id}, m_dir / "scancel.txt");
      } catch (...) {
      }
    }
  }

  std::optional<AttemptEnd> poll() override {
    const double now = SystemClock::instance().monotonic_seconds();
    if (now - m_last_query < m_poll_s)
      return std::nullopt;
    m_last_query = now;
    const auto state = proc::batch_job_final_state(m_id, m_dir / "scontrol.txt");
    if (!state)
      return std::nullopt;
    m_ended = true;
    std::ifstream in(m_dir / "exit_code");
    int code = 0;
    if (in >> code)
      return AttemptEnd{code, std::nullopt, fmt::format("exit {} (Slurm job {} {})", code, m_id, *state)};
    return AttemptEnd{std::nullopt, std::nullopt,
                      fmt::format("Slurm job {} ended {} without an exit code: {}", m_id, *state,
                                  proc::log_tail(m_dir / "slurm.log", 2))};
  }

private:
  fs::path m_dir;
  double m_poll_s;
  std::string m_id;
  double m_last_query = -1e300;
  bool m_ended = false;
};

} // namespace

std::unique_ptr<TaskAttempt>
start_attempt(const fs::path& executable, const std::vector<std::string>& args, const fs::path& dir,
              const std::string& task_name, const SlurmSettings& slurm) {
  if (slurm.enabled)
    return std::make_unique<SlurmAttempt>(executable, args, dir, task_name, slurm);
  return std::make_unique<LocalAttempt>(executable, args, dir);
}

void
stop_stale_attempt(const fs::path& dir, const Clock& clock) {
  std::ifstream in(dir / "slurm_job");
  std::string id;
  if (!(in >> id) || id.find_first_not_of("0123456789") != std::string::npos)
    return;
  try {
    proc::cancel_batch_jobs({id}, dir / "scancel.txt");
  } catch (...) {
    return; // No Slurm here any more: nothing can be writing into the folder.
  }
  const double deadline = clock.monotonic_seconds() + kStaleJobWaitSeconds;
  while (!proc::batch_job_final_state(id, dir / "scontrol.txt")) {
    if (clock.monotonic_seconds() > deadline)
      throw RuntimeFailure(fmt::format("Slurm job {} of a killed attempt in {} has not ended {:.0f} s after scancel; "
                                       "end it (scancel --signal=KILL {}) and resume again",
                                       id, dir.string(), kStaleJobWaitSeconds, id));
    clock.sleep_for(0.2);
  }
}

} // namespace optkit::flow
