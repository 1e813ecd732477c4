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

GraphOutcome
run_task_graph(const std::vector<FlowTask>& tasks, const GraphOptions& options) {
  if (options.slots < 1)
    throw std::invalid_argument("run_task_graph: slots < 1");
  const Clock& clock = SystemClock::instance();
  const double start = clock.monotonic_seconds();
  GraphOutcome outcome;
  std::map<std::string, std::string> keys;
  std::map<std::string, TaskResult> readable = options.earlier;
  for (const auto& [name, r] : options.earlier)
    keys[name] = r.key;
  std::vector<const FlowTask*> pending;
  std::size_t done = 0;
  fs::create_directories(options.work_dir);
  for (const auto& task : tasks) {
    for (const auto& name : task.reads)
      if (!keys.count(name))
        throw std::logic_error("flow task " + task.name + " reads " + name + ", which is not before it");
    keys[task.name] = task_key(task, keys);
    const fs::path dir = options.work_dir / folder_name(task.name, keys[task.name]);
    if (auto found = read_finished(dir, task.name, keys[task.name])) {
      readable[task.name] = *found;
      outcome.finished[task.name] = *found;
      ++done;
      if (options.on_finished)
        options.on_finished(*found, done, tasks.size());
    } else {
      pending.push_back(&task);
    }
  }

  std::vector<Running> running;
  std::map<const FlowTask*, int> attempts;
  double idle_since = start; // when the last child ended (or the graph began)
  auto launch = [&](const FlowTask* task) {
    Running r;
    r.task = task;
    r.key = keys.at(task->name);
    r.dir = options.work_dir / folder_name(task->name, r.key);
    r.attempt = ++attempts[task];
    std::error_code ec;
    stop_stale_attempt(r.dir, clock);
    fs::remove_all(r.dir, ec); // whatever a killed attempt left
    fs::create_directories(r.dir);
    std::vector<std::string> args = options.global_args;
    const auto command = task->command(r.dir, readable);
    args.insert(args.end(), command.begin(), command.end());
    if (options.archive)
      r.trial_id = options.archive->begin_trial(
          options.run_id, options.first_trial_index + (task - tasks.data()), r.attempt,
          {{"task", task->name}, {"stage", task->stage}, {"key", r.key}, {"argv", command}});
    r.started = clock.monotonic_seconds();
    try {
      r.attempt_run = start_attempt(options.executable, args, r.dir, task->name, options.slurm);
    } catch (const std::exception& e) {
      if (options.archive)
        options.archive->finish_trial(
            r.trial_id, proc::TrialEnd{proc::TrialStatus::failed, std::nullopt, std::nullopt, nullptr, e.what()});
      throw;
    }
    if (options.on_started && (task->announce_start || r.attempt > 1))
      options.on_started(task->name, r.attempt);
    running.push_back(std::move(r));
  };
  auto inputs_state = [&](const FlowTask* task) {
    // 1: all finished, 0: waiting, -1: an input failed
    for (const auto& name : task->reads) {
      if (outcome.failed.count(name))
        return -1;
      if (!readable.count(name))
        return 0;
    }
    return 1;
  };

  while (!pending.empty() || !running.empty()) {
    throw_if_interrupted(); // the Running children are killed (whole group) as they are destroyed
    bool changed = false;
    for (auto it = pending.begin(); it != pending.end();) {
      const int state = inputs_state(*it);
      if (state < 0) {
        outcome.failed[(*it)->name] = "an input failed";
        it = pending.erase(it);
        changed = true;
      } else if (state > 0 && static_cast<int>(running.size()) < options.slots) {
        if (running.empty())
          outcome.idle_gap_s += clock.monotonic_seconds() - idle_since;
        launch(*it);
        it = pending.erase(it);
        changed = true;
      } else {
        ++it;
      }
    }
    for (auto it = running.begin(); it != running.end();) {
      const auto status = it->attempt_run->poll();
      if (!status) {
        ++it;
        continue;
      }
      changed = true;
      const double seconds = clock.monotonic_seconds() - it->started;
      outcome.busy_slot_s += seconds;
      const FlowTask& task = *it->task;
      const bool exited = status->exit_code.has_value();
      const int code = exited ? *status->exit_code : -1;
      TaskResult result;
      result.name = task.name;
      result.key = it->key;
      result.dir = it->dir;
      result.exit_code = code;
      result.seconds = seconds;
      result.attempts = it->attempt;
      std::string error;
      if (exited && task.finished_exits.count(code)) {
        const std::string text = read_text(it->dir / "stdout.json");
        result.output = nlohmann::json::parse(text, nullptr, false);
        if (!result.output.is_object()) // every stage command prints one JSON object (--format json)
          error = "it printed no JSON result (see " + (it->dir / "stdout.json").string() + ")";
      } else {
        error = fmt::format("{}: {}", status->how, proc::log_tail(it->dir / "log.txt", 1));
      }
      const bool transient = !exited || code == 3;
      if (options.archive)
        options.archive->finish_trial(
            it->trial_id,
            proc::TrialEnd{error.empty() ? proc::TrialStatus::succeeded : proc::TrialStatus::failed, status->exit_code,
                           status->signal, error.empty() ? result_json(result) : nullptr, error});
      const FlowTask* finished_task = it->task;
      it = running.erase(it);
      if (running.empty())
        idle_since = clock.monotonic_seconds();
      if (error.empty()) {
        write_file_atomic(result.dir / "result.json", result_json(result).dump(2) + "\n");
        readable[task.name] = result;
        outcome.finished[task.name] = result;
        ++done;
        if (options.on_finished)
          options.on_finished(result, done, tasks.size());
      } else if (transient && attempts[finished_task] <= options.retries) {
        pending.insert(pending.begin(), finished_task); // retried first
      } else {
        outcome.failed[task.name] = error;
        ++done;
      }
    }
    if (!changed)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double end = clock.monotonic_seconds();
  outcome.idle_gap_s += end - idle_since; // after the last child (all of it when every task was reused)
  outcome.wall_s = end - start;
  return outcome;
}

} // namespace optkit::flow
