#include "proc/slurm_jobs.hpp"

#include "core/error.hpp"
#include "core/text.hpp"
#include "proc/child_process.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace optkit::proc {

namespace {

struct CommandOutput {
  ExitStatus status;
  std::string text;
};

CommandOutput
run_command(const std::string& program, const std::vector<std::string>& args, const std::filesystem::path& log) {
  const auto executable = find_on_path(program);
  if (!executable)
    throw RuntimeFailure(
        fmt::format("'{}' is not on PATH: the Slurm executor needs the Slurm client commands", program));
  ChildProcess child(*executable, args, log);
  CommandOutput out;
  out.status = child.wait();
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  out.text = text.str();
  return out;
}

} // namespace

std::string
submit_batch_job(const BatchJob& job, const std::filesystem::path& scratch) {
  std::vector<std::string> args{"--parsable", "--job-name", job.name, "--output", job.log.string(), "--ntasks", "1"};
  if (!job.partition.empty())
    args.insert(args.end(), {"--partition", job.partition});
  args.insert(args.end(), job.sbatch_args.begin(), job.sbatch_args.end());
  args.insert(args.end(), {"--wrap", job.shell_command});
  const auto out = run_command("sbatch", args, scratch);
  const std::string id = std::string(trim(split(out.text, ';').front()));
  if (!out.status.exit_code || *out.status.exit_code != 0 || id.empty() ||
      id.find_first_not_of("0123456789") != std::string::npos)
    throw RuntimeFailure(fmt::format("sbatch failed ({}): {}", describe(out.status), trim(out.text)));
  return id;
}

std::optional<std::string>
batch_job_final_state(const std::string& id, const std::filesystem::path& scratch) {
  const auto out = run_command("scontrol", {"show", "job", "-o", id}, scratch);
  if (out.text.find("Invalid job id") != std::string::npos)
    return std::string("COMPLETED"); // the record aged out: it ended
  const auto at = out.text.find("JobState=");
  if (at == std::string::npos)
    return std::nullopt;
  const auto end = out.text.find(' ', at);
  const std::string state = out.text.substr(at + 9, end == std::string::npos ? std::string::npos : end - at - 9);
  static const std::vector<std::string> running{"PENDING",   "RUNNING",  "CONFIGURING", "COMPLETING",
                                                "SUSPENDED", "REQUEUED", "RESIZING"};
  if (std::find(running.begin(), running.end(), state) != running.end())
    return std::nullopt;
  return state;
}

void
cancel_batch_jobs(const std::vector<std::string>& ids, const std::filesystem::path& scratch) {
  if (!ids.empty())
    run_command("scancel", ids, scratch);
}

} // namespace optkit::proc
