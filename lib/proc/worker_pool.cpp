#include "proc/worker_pool.hpp"

#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "core/text.hpp"
#include "proc/child_process.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <deque>
#include <fstream>

namespace optkit::proc {

double
RetryPolicy::backoff_before(int next_attempt) const {
  const double delay = backoff_initial_s * std::pow(backoff_factor, std::max(0, next_attempt - 2));
  return std::min(delay, backoff_max_s);
}

namespace {

struct PendingAttempt {
  std::size_t task_index;
  int attempt;
  double not_before; // monotonic seconds
};

struct RunningAttempt {
  std::size_t task_index;
  int attempt;
  std::int64_t trial_id;
  std::optional<int> gpu;
  std::filesystem::path log;
  std::filesystem::path result_path;
  std::unique_ptr<ChildProcess> child;
  double started;
  std::optional<double> term_sent; // when SIGTERM went to the group after a timeout
  bool killed = false;
};

std::string
last_log_line(const std::filesystem::path& log) {
  std::ifstream in(log);
  std::string line;
  std::string last;
  while (std::getline(in, line)) {
    if (!trim(line).empty()) {
      last = std::string(trim(line));
    }
  }
  return last.size() > 300 ? last.substr(0, 300) + "..." : last;
}

bool
is_transient(const RetryPolicy& policy, TrialStatus status, const ExitStatus& exit) {
  if (status == TrialStatus::timed_out) {
    return policy.retry_on_timeout;
  }
  if (exit.signal) {
    return policy.retry_on_signal;
  }
  return exit.exit_code && std::find(policy.retry_exit_codes.begin(), policy.retry_exit_codes.end(), *exit.exit_code) !=
                               policy.retry_exit_codes.end();
}

class PoolRun {
public:
  PoolRun(const PoolOptions& options, const std::vector<WorkerTask>& tasks)
      : m_options(options)
      , m_clock(options.clock ? *options.clock : SystemClock::instance())
      , m_tasks(tasks)
      , m_outcomes(tasks.size())
      , m_free_gpus(options.gpus.begin(), options.gpus.end())
      , m_progress(options.progress_label, tasks.size(), "tasks",
                   options.show_progress ? ProgressOptions::defaults()
                                         : ProgressOptions{.mode = ProgressMode::silent}) {
    m_slots = std::max(1, options.slots);
    if (!options.gpus.empty()) {
      m_slots = std::min(m_slots, static_cast<int>(options.gpus.size()));
    }
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      m_pending.push_back({i, 1, 0.0});
      m_outcomes[i].task_index = i;
    }
  }

  std::vector<WorkerOutcome> run() {
    while (!m_pending.empty() || !m_running.empty()) {
      if (interrupt_requested()) {
        stop_all();
        throw Interrupted(fmt::format("interrupted by signal {}; stopped {} worker(s)", interrupt_signal(), m_stopped));
      }
      const double now = m_clock.monotonic_seconds();
      launch_due(now);
      for (std::size_t i = 0; i < m_running.size();) {
        if (check(m_running[i], now)) {
          m_running.erase(m_running.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
      }
      show_worker_progress(now);
      m_clock.sleep_for(m_options.poll_interval_s);
    }
    m_progress.finish();
    return m_outcomes;
  }

private:
  // What the running workers last said of how far they are, beside the pool's count (read at most
  // once a second).
  void show_worker_progress(double now) {
    if (now - m_progress_read_at < 1.0)
      return;
    m_progress_read_at = now;
    std::string detail;
    for (const auto& r : m_running)
      if (const auto line = read_worker_progress(r.result_path); !line.empty())
        detail += fmt::format("{}task {}: {}", detail.empty() ? "" : "; ", r.task_index, line);
    m_progress.set_detail(detail);
  }

  void launch_due(double now) {
    while (static_cast<int>(m_running.size()) < m_slots) {
      auto due = std::find_if(m_pending.begin(), m_pending.end(),
                              [&](const PendingAttempt& p) { return p.not_before <= now; });
      if (due == m_pending.end()) {
        return;
      }
      const PendingAttempt pending = *due;
      m_pending.erase(due);
      launch(pending, now);
    }
  }

  void launch(const PendingAttempt& pending, double now) {
    const WorkerTask& task = m_tasks[pending.task_index];
    const std::int64_t trial_index = m_options.first_trial_index + static_cast<std::int64_t>(pending.task_index);
    const auto dir = m_options.work_dir / fmt::format("trial-{:04}", trial_index);
    std::filesystem::create_directories(dir);
    const auto stem = dir / fmt::format("attempt-{}", pending.attempt);

    RunningAttempt r{pending.task_index,
                     pending.attempt,
                     0,
                     std::nullopt,
                     stem.string() + ".log",
                     stem.string() + ".result.json",
                     nullptr,
                     now,
                     std::nullopt};
    std::filesystem::remove(r.result_path);
    if (!m_free_gpus.empty()) {
      r.gpu = m_free_gpus.front();
      m_free_gpus.pop_front();
    }
    if (m_options.recorder) {
      r.trial_id = m_options.recorder->begin_trial(m_options.run_id, trial_index, pending.attempt, task.params);
    }
    WorkerSpec spec{m_options.run_id,
                    r.trial_id,
                    trial_index,
                    pending.attempt,
                    m_options.recorder ? m_options.recorder->path().string() : std::string(),
                    r.result_path,
                    r.gpu,
                    task.payload};
    const auto spec_path = stem.string() + ".spec.json";
    {
      std::ofstream out(spec_path);
      out << to_json(spec).dump(2) << '\n';
    }
    std::vector<std::string> args = m_options.global_args;
    args.insert(args.end(), task.command.begin(), task.command.end());
    args.push_back("--worker");
    args.push_back(spec_path);
    std::map<std::string, std::string> env;
    if (r.gpu) {
      env["CUDA_VISIBLE_DEVICES"] = std::to_string(*r.gpu);
    }
    log::debug("trial {} attempt {}: starting {} {}", pending.task_index, pending.attempt,
               m_options.executable.string(), join(args, " "));
    try {
      r.child = std::make_unique<ChildProcess>(m_options.executable, args, r.log, env);
    } catch (const RuntimeFailure& e) {
      release_gpu(r);
      finish_trial(r, TrialStatus::failed, ExitStatus{}, e.what(), now);
      m_outcomes[r.task_index].error = e.what();
      final(r.task_index);
      return;
    }
    m_running.push_back(std::move(r));
  }

  // Advances one running attempt; true when it has ended.
  bool check(RunningAttempt& r, double now) {
    const WorkerTask& task = m_tasks[r.task_index];
    const auto exit = r.child->poll();
    if (!exit) {
      if (task.timeout_s > 0 && !r.term_sent && now - r.started > task.timeout_s) {
        note(r, "timeout",
             fmt::format("trial {} attempt {}: timed out after {}; sending SIGTERM", trial_number(r), r.attempt,
                         format_duration(task.timeout_s)));
        r.child->signal_group(SIGTERM);
        r.term_sent = now;
      } else if (r.term_sent && !r.killed && now - *r.term_sent > task.grace_s) {
        note(r, "kill",
             fmt::format("trial {} attempt {}: still running {} after SIGTERM; sending SIGKILL", trial_number(r),
                         r.attempt, format_duration(task.grace_s)));
        r.child->signal_group(SIGKILL);
        r.killed = true;
      }
      return false;
    }
    release_gpu(r); // poll() killed whatever the attempt left in its group

    TrialStatus status = TrialStatus::succeeded;
    std::string error;
    nlohmann::json result;
    if (r.term_sent) {
      status = TrialStatus::timed_out;
      error = fmt::format("timed out after {} ({})", format_duration(task.timeout_s), describe(*exit));
    } else if (exit->exit_code == 0) {
      std::ifstream in(r.result_path);
      result = in ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json(nullptr);
      if (result.is_null() || result.is_discarded()) {
        status = TrialStatus::failed;
        result = nullptr;
        error = "worker exited 0 without writing a valid result";
      }
    } else {
      status = TrialStatus::failed;
      error = describe(*exit);
    }
    std::string child_message;
    if (status != TrialStatus::succeeded) {
      const std::string last = last_log_line(r.log);
      if (!last.empty()) {
        error += ": " + last;
      }
      constexpr std::string_view prefix = "optkit: error: ";
      child_message = last.starts_with(prefix) ? last.substr(prefix.size()) : last;
    }
    finish_trial(r, status, *exit, error, now, result);

    WorkerOutcome& outcome = m_outcomes[r.task_index];
    outcome.child_message = child_message;
    if (status != TrialStatus::succeeded && r.attempt < task.retry.max_attempts &&
        is_transient(task.retry, status, *exit)) {
      const double delay = task.retry.backoff_before(r.attempt + 1);
      note(r, "retry",
           fmt::format("trial {} attempt {}/{} failed ({}); retrying in {}", trial_number(r), r.attempt,
                       task.retry.max_attempts, error, format_duration(delay)));
      m_pending.push_back({r.task_index, r.attempt + 1, now + delay});
      return true;
    }
    outcome.result = result;
    if (status != TrialStatus::succeeded) {
      note(r, "trial_" + to_string(status),
           fmt::format("trial {} {} after {} attempt(s): {} (log: {})", trial_number(r), to_string(status), r.attempt,
                       error, r.log.string()));
    }
    final(r.task_index);
    return true;
  }

  std::int64_t trial_number(const RunningAttempt& r) const {
    return m_options.first_trial_index + static_cast<std::int64_t>(r.task_index);
  }

  // A warning for the person at the terminal, and the same line as an event in the archive.
  void note(const RunningAttempt& r, const std::string& kind, const std::string& message) {
    log::warn("{}", message);
    if (m_options.recorder) {
      m_options.recorder->add_event(m_options.run_id, r.trial_id, "warn", kind, message);
    }
  }

  void finish_trial(const RunningAttempt& r, TrialStatus status, const ExitStatus& exit, const std::string& error,
                    double now, const nlohmann::json& result = nullptr) {
    WorkerOutcome& outcome = m_outcomes[r.task_index];
    outcome.status = status;
    outcome.attempts = r.attempt;
    outcome.exit_code = exit.exit_code;
    outcome.signal = exit.signal;
    outcome.error = error;
    outcome.log = r.log;
    outcome.seconds = now - r.started;
    outcome.trial_id = r.trial_id;
    if (!m_options.recorder) {
      return;
    }
    TrialEnd end{status, exit.exit_code, exit.signal, result, error, {}};
    if (result.is_object() && result.contains(kPeakRssField) && result.at(kPeakRssField).is_number_unsigned())
      end.peak_rss_bytes = result.at(kPeakRssField).get<std::uint64_t>();
    m_options.recorder->finish_trial(r.trial_id, end);
    std::error_code ec;
    if (std::filesystem::exists(r.log, ec)) {
      m_options.recorder->add_artifact(m_options.run_id, r.trial_id, r.log, "log");
    }
  }

  void final(std::size_t task_index) {
    const WorkerOutcome& outcome = m_outcomes[task_index];
    m_progress.advance();
    if (m_options.on_finished) {
      m_options.on_finished(outcome);
    }
  }

  void release_gpu(RunningAttempt& r) {
    if (r.gpu) {
      m_free_gpus.push_back(*r.gpu);
      r.gpu.reset();
    }
  }

  // SIGTERM to every group, the longest grace period of the running tasks (cut short by a second
  // interrupt), then SIGKILL; every attempt is recorded as interrupted.
  void stop_all() {
    double grace = 0;
    for (auto& r : m_running) {
      r.child->signal_group(SIGTERM);
      grace = std::max(grace, m_tasks[r.task_index].grace_s);
    }
    const int interrupts = interrupt_count();
    const double deadline = m_clock.monotonic_seconds() + grace;
    while (m_clock.monotonic_seconds() < deadline && interrupt_count() == interrupts) {
      const bool all_done = std::all_of(m_running.begin(), m_running.end(),
                                        [](RunningAttempt& r) { return r.child->poll().has_value(); });
      if (all_done) {
        break;
      }
      m_clock.sleep_for(m_options.poll_interval_s);
    }
    const double now = m_clock.monotonic_seconds();
    for (auto& r : m_running) {
      r.child->signal_group(SIGKILL);
      const ExitStatus exit = r.child->wait();
      release_gpu(r);
      finish_trial(r, TrialStatus::interrupted, exit, "interrupted", now);
      note(r, "interrupted",
           fmt::format("trial {} attempt {}: stopped ({})", trial_number(r), r.attempt, describe(exit)));
      ++m_stopped;
    }
    m_running.clear();
    m_pending.clear();
  }

  const PoolOptions& m_options;
  const Clock& m_clock;
  const std::vector<WorkerTask>& m_tasks;
  std::vector<WorkerOutcome> m_outcomes;
  std::deque<int> m_free_gpus;
  std::vector<PendingAttempt> m_pending;
  std::vector<RunningAttempt> m_running;
  Progress m_progress;
  double m_progress_read_at = -1e9;
  int m_slots = 1;
  int m_stopped = 0;
};

} // namespace

WorkerPool::WorkerPool(PoolOptions options) : m_options(std::move(options)) {
  if (m_options.executable.empty()) {
    throw RuntimeFailure("worker pool: no executable to run (cannot resolve /proc/self/exe)");
  }
  std::filesystem::create_directories(m_options.work_dir);
}

std::vector<WorkerOutcome>
WorkerPool::run(const std::vector<WorkerTask>& tasks) {
  install_interrupt_handlers();
  return PoolRun(m_options, tasks).run();
}

void
throw_worker_failure(const WorkerOutcome& outcome, std::string_view what) {
  if (outcome.exit_code == static_cast<int>(ExitCode::bad_input)) {
    throw InputError(outcome.failure_message());
  }
  throw RuntimeFailure(fmt::format("{}: {} (log: {})", what, outcome.error, outcome.log.string()));
}

} // namespace optkit::proc
