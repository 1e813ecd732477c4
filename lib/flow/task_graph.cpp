#include "flow/task_graph.hpp"

#include "core/atomic_file.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "core/sha256.hpp"
#include "flow/task_attempt.hpp"
#include "proc/child_process.hpp"

#include <fmt/format.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

namespace optkit::flow {

namespace fs = std::filesystem;

namespace {

std::string
folder_name(const std::string& task_name, const std::string& key) {
  std::string safe = task_name;
  for (char& c : safe)
    if (c == '/')
      c = '.';
  return safe + "-" + key.substr(0, 16);
}

nlohmann::json
result_json(const TaskResult& r) {
  return {{"name", r.name},     {"key", r.key},         {"exit_code", r.exit_code},
          {"output", r.output}, {"seconds", r.seconds}, {"attempts", r.attempts}};
}

std::optional<TaskResult>
read_finished(const fs::path& dir, const std::string& name, const std::string& key) {
  std::ifstream in(dir / "result.json");
  if (!in)
    return std::nullopt;
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || j.value("key", "") != key) // a torn or foreign file: redo the task
    return std::nullopt;
  TaskResult r;
  r.name = name;
  r.key = key;
  r.dir = dir;
  r.exit_code = j.at("exit_code").get<int>();
  r.output = j.at("output");
  r.seconds = j.at("seconds").get<double>();
  r.attempts = j.at("attempts").get<int>();
  r.reused = true;
  return r;
}

std::string
read_text(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Running {
  const FlowTask* task = nullptr;
  std::string key;
  fs::path dir;
  int attempt = 0;
  double started = 0;
  std::int64_t trial_id = 0;
  std::unique_ptr<TaskAttempt> attempt_run;
};

} // namespace

std::string
task_key(const FlowTask& task, const std::map<std::string, std::string>& keys_by_name) {
  nlohmann::json inputs = nlohmann::json::object();
  for (const auto& name : task.reads)
    inputs[name] = keys_by_name.at(name);
  const nlohmann::json whole{{"stage", task.stage}, {"spec", task.spec}, {"reads", inputs}};
  return sha256_hex(whole.dump());
}

namespace {

// One run of the graph: tasks whose results a finished earlier run left are reused; the others
// start as their inputs finish, up to options.slots at a time, and are polled until they end.
class GraphRun {
public:
  GraphRun(const std::vector<FlowTask>& tasks, const GraphOptions& options)
      : m_tasks(tasks)
      , m_options(options)
      , m_clock(SystemClock::instance())
      , m_start(m_clock.monotonic_seconds())
      , m_readable(options.earlier)
      , m_idle_since(m_start) {
    if (options.slots < 1)
      throw std::invalid_argument("run_task_graph: slots < 1");
    for (const auto& [name, r] : options.earlier)
      m_keys[name] = r.key;
  }

  GraphOutcome run() {
    fs::create_directories(m_options.work_dir);
    reuse_finished();
    while (!m_pending.empty() || !m_running.empty()) {
      throw_if_interrupted(); // the Running children are killed (whole group) as they are destroyed
      const bool started = start_ready();
      const bool ended = reap_ended();
      if (!started && !ended)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const double end = m_clock.monotonic_seconds();
    m_outcome.idle_gap_s += end - m_idle_since; // after the last child (all of it when every task was reused)
    m_outcome.wall_s = end - m_start;
    return std::move(m_outcome);
  }

private:
  fs::path task_dir(const FlowTask& task) const {
    return m_options.work_dir / folder_name(task.name, m_keys.at(task.name));
  }

  // Each task's key; a task whose folder holds a result of that key is done already.
  void reuse_finished() {
    for (const auto& task : m_tasks) {
      for (const auto& name : task.reads)
        if (!m_keys.count(name))
          throw std::logic_error("flow task " + task.name + " reads " + name + ", which is not before it");
      m_keys[task.name] = task_key(task, m_keys);
      if (auto found = read_finished(task_dir(task), task.name, m_keys[task.name])) {
        m_readable[task.name] = *found;
        m_outcome.finished[task.name] = *found;
        announce_finished(*found);
      } else {
        m_pending.push_back(&task);
      }
    }
  }

  void announce_finished(const TaskResult& result) {
    ++m_done;
    if (m_options.on_finished)
      m_options.on_finished(result, m_done, m_tasks.size());
  }

  // 1: all inputs finished, 0: waiting, -1: an input failed.
  int inputs_state(const FlowTask& task) const {
    for (const auto& name : task.reads) {
      if (m_outcome.failed.count(name))
        return -1;
      if (!m_readable.count(name))
        return 0;
    }
    return 1;
  }

  // Pending tasks whose inputs failed fail; those whose inputs finished start while slots are
  // free. Whether anything changed.
  bool start_ready() {
    bool changed = false;
    for (auto it = m_pending.begin(); it != m_pending.end();) {
      const int state = inputs_state(**it);
      if (state < 0) {
        m_outcome.failed[(*it)->name] = "an input failed";
        it = m_pending.erase(it);
        changed = true;
      } else if (state > 0 && static_cast<int>(m_running.size()) < m_options.slots) {
        if (m_running.empty())
          m_outcome.idle_gap_s += m_clock.monotonic_seconds() - m_idle_since;
        launch(*it);
        it = m_pending.erase(it);
        changed = true;
      } else {
        ++it;
      }
    }
    return changed;
  }

  void launch(const FlowTask* task) {
    Running r;
    r.task = task;
    r.key = m_keys.at(task->name);
    r.dir = task_dir(*task);
    r.attempt = ++m_attempts[task];
    std::error_code ec;
    stop_stale_attempt(r.dir, m_clock);
    fs::remove_all(r.dir, ec); // whatever a killed attempt left
    fs::create_directories(r.dir);
    std::vector<std::string> args = m_options.global_args;
    const auto command = task->command(r.dir, m_readable);
    args.insert(args.end(), command.begin(), command.end());
    if (m_options.archive)
      r.trial_id = m_options.archive->begin_trial(
          m_options.run_id, m_options.first_trial_index + (task - m_tasks.data()), r.attempt,
          {{"task", task->name}, {"stage", task->stage}, {"key", r.key}, {"argv", command}});
    r.started = m_clock.monotonic_seconds();
    try {
      r.attempt_run = start_attempt(m_options.executable, args, r.dir, task->name, m_options.slurm);
    } catch (const std::exception& e) {
      if (m_options.archive)
        m_options.archive->finish_trial(
            r.trial_id, proc::TrialEnd{proc::TrialStatus::failed, std::nullopt, std::nullopt, nullptr, e.what()});
      throw;
    }
    if (m_options.on_started && (task->announce_start || r.attempt > 1))
      m_options.on_started(task->name, r.attempt);
    m_running.push_back(std::move(r));
  }

  // Running tasks that ended: finished, retried (a transient failure within --retries) or failed.
  // Whether any ended.
  bool reap_ended() {
    bool changed = false;
    for (auto it = m_running.begin(); it != m_running.end();) {
      const auto status = it->attempt_run->poll();
      if (!status) {
        ++it;
        continue;
      }
      changed = true;
      const Running ended = std::move(*it);
      it = m_running.erase(it);
      if (m_running.empty())
        m_idle_since = m_clock.monotonic_seconds();
      settle(ended, *status);
    }
    return changed;
  }

  // The ended attempt's result (its JSON on stdout when its exit code says it finished) or error.
  std::pair<TaskResult, std::string> attempt_result(const Running& r, const AttemptEnd& status) {
    const double seconds = m_clock.monotonic_seconds() - r.started;
    m_outcome.busy_slot_s += seconds;
    const bool exited = status.exit_code.has_value();
    const int code = exited ? *status.exit_code : -1;
    TaskResult result;
    result.name = r.task->name;
    result.key = r.key;
    result.dir = r.dir;
    result.exit_code = code;
    result.seconds = seconds;
    result.attempts = r.attempt;
    std::string error;
    if (exited && r.task->finished_exits.count(code)) {
      result.output = nlohmann::json::parse(read_text(r.dir / "stdout.json"), nullptr, false);
      if (!result.output.is_object()) // every stage command prints one JSON object (--format json)
        error = "it printed no JSON result (see " + (r.dir / "stdout.json").string() + ")";
    } else {
      error = fmt::format("{}: {}", status.how, proc::log_tail(r.dir / "log.txt", 1));
    }
    return {std::move(result), std::move(error)};
  }

  void settle(const Running& r, const AttemptEnd& status) {
    auto [result, error] = attempt_result(r, status);
    if (m_options.archive)
      m_options.archive->finish_trial(
          r.trial_id,
          proc::TrialEnd{error.empty() ? proc::TrialStatus::succeeded : proc::TrialStatus::failed, status.exit_code,
                         status.signal, error.empty() ? result_json(result) : nullptr, error});
    const bool transient = !status.exit_code || *status.exit_code == 3;
    if (error.empty()) {
      write_file_atomic(result.dir / "result.json", result_json(result).dump(2) + "\n");
      m_readable[r.task->name] = result;
      m_outcome.finished[r.task->name] = result;
      announce_finished(result);
    } else if (transient && m_attempts[r.task] <= m_options.retries) {
      m_pending.insert(m_pending.begin(), r.task); // retried first
    } else {
      m_outcome.failed[r.task->name] = error;
      ++m_done;
    }
  }

  const std::vector<FlowTask>& m_tasks;
  const GraphOptions& m_options;
  const Clock& m_clock;
  const double m_start;
  GraphOutcome m_outcome;
  std::map<std::string, std::string> m_keys;    // task → key (earlier runs' too)
  std::map<std::string, TaskResult> m_readable; // finished results later tasks may read
  std::vector<const FlowTask*> m_pending;       // not started, in order
  std::vector<Running> m_running;
  std::map<const FlowTask*, int> m_attempts;
  std::size_t m_done = 0;
  double m_idle_since; // when the last child ended (or the graph began)
};

} // namespace

GraphOutcome
run_task_graph(const std::vector<FlowTask>& tasks, const GraphOptions& options) {
  return GraphRun(tasks, options).run();
}

} // namespace optkit::flow
