// Trials as Slurm batch jobs (proc/slurm_jobs): sbatch --wrap "optkit … tune --worker SPEC", polled with
// scontrol (a job whose record has aged out counts as finished), cancelled with scancel. A job
// that ends without a result file (killed, out of memory, timed out, node failure) is reported as
// a crashed or timed-out trial quoting its state and the end of its log.
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "core/text.hpp"
#include "proc/child_process.hpp"
#include "proc/slurm_jobs.hpp"
#include "proc/worker_spec.hpp"
#include "tune/trial_executor.hpp"

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

namespace optkit::tune {

namespace {

class SlurmExecutor final : public TrialExecutor {
public:
  explicit SlurmExecutor(SlurmOptions options) : m_options(std::move(options)) {
    std::filesystem::create_directories(m_options.directory);
  }
  ~SlurmExecutor() override {
    try {
      cancel_all();
    } catch (...) {
    }
  }

  int slots() const override { return std::max(1, m_options.slots); }
  std::size_t in_flight() const override { return m_jobs.size(); }

  void submit(const TrialJob& job) override {
    const auto stem = m_options.directory / fmt::format("trial-{}-{}", job.number, to_string(job.phase));
    proc::WorkerSpec spec;
    spec.run_id = m_options.run_id;
    spec.trial_index = job.number;
    spec.archive = m_options.archive;
    spec.result_path = stem.string() + ".result.json";
    spec.payload = {{"options", m_options.payload},
                    {"config", job.config},
                    {"seed", job.seed},
                    {"number", job.number},
                    {"phase", to_string(job.phase)}};
    std::filesystem::remove(spec.result_path);
    const std::string spec_file = stem.string() + ".spec.json";
    {
      std::ofstream out(spec_file);
      out << proc::to_json(spec).dump(2);
    }
    std::vector<std::string> words = m_options.worker_command;
    words.insert(words.end(), {"tune", "--worker", spec_file});
    std::vector<std::string> quoted;
    for (const auto& w : words)
      quoted.push_back(shell_quote(w));
    const std::string log = stem.string() + ".log";
    const std::string id = proc::submit_batch_job({fmt::format("optkit-tune-{}", job.number), m_options.partition,
                                                   m_options.sbatch_args, log, "exec " + join(quoted, " ")},
                                                  stem.string() + ".sbatch.txt");
    m_jobs[id] = {job, spec.result_path, log};
  }

  std::optional<std::pair<TrialJob, TrialOutcome>> wait_one() override {
    if (m_jobs.empty())
      throw RuntimeFailure("no Slurm job to wait for");
    for (;;) {
      if (interrupt_requested())
        return std::nullopt;
      for (auto it = m_jobs.begin(); it != m_jobs.end(); ++it) {
        const auto state = job_state(it->first);
        if (!state)
          continue; // still pending or running
        auto result = finish(it->second, *state);
        m_jobs.erase(it);
        return result;
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(m_options.poll_s));
    }
  }

  void cancel_all() override {
    if (m_jobs.empty())
      return;
    std::vector<std::string> ids;
    for (const auto& [id, job] : m_jobs)
      ids.push_back(id);
    proc::cancel_batch_jobs(ids, m_options.directory / "scancel.txt");
    m_jobs.clear();
  }

private:
  struct Submitted {
    TrialJob job;
    std::filesystem::path result, log;
  };

  std::optional<std::string> job_state(const std::string& id) {
    return proc::batch_job_final_state(id, m_options.directory / "scontrol.txt");
  }

  std::pair<TrialJob, TrialOutcome> finish(const Submitted& s, const std::string& state) {
    TrialOutcome outcome;
    if (std::filesystem::exists(s.result)) {
      std::ifstream in(s.result);
      outcome = outcome_from_json(nlohmann::json::parse(in));
      outcome.engine["slurm_state"] = state;
      return {s.job, outcome};
    }
    outcome.status = state == "TIMEOUT" ? TrialStatus::timed_out : TrialStatus::crashed;
    outcome.violation = 10;
    outcome.error = fmt::format("Slurm job ended {} without a result: {}", state, proc::log_tail(s.log, 3));
    outcome.log = s.log.string();
    return {s.job, outcome};
  }

  SlurmOptions m_options;
  std::map<std::string, Submitted> m_jobs;
};

} // namespace

std::unique_ptr<TrialExecutor>
make_slurm_executor(SlurmOptions options) {
  return std::make_unique<SlurmExecutor>(std::move(options));
}

void
run_trial_worker(const std::filesystem::path& spec_file,
                 const std::function<std::unique_ptr<TrialEvaluator>(const nlohmann::json& options)>& make) {
  const auto spec = proc::read_worker_spec(spec_file);
  const auto& p = spec.payload;
  auto evaluator = make(p.at("options"));
  const auto directory = spec.result_path.parent_path() / fmt::format("trial-{}", p.at("number").get<int>());
  TrialOutcome outcome;
  const auto config = p.at("config");
  const std::string why = evaluator->invalid_reason(config);
  if (!why.empty()) {
    outcome.status = TrialStatus::invalid;
    outcome.error = why;
    outcome.violation = 10;
  } else {
    outcome = evaluator->evaluate(config, p.at("seed").get<std::uint64_t>(), {directory, ""}); // Slurm gives the GPUs
  }
  proc::write_worker_result(spec, to_json(outcome));
}

} // namespace optkit::tune
