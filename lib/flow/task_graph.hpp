// The flow's stage work as a graph of tasks, each one `optkit <command> ...` in its own child
// process. A task's output folder is named by a content key — the hash of its command's inputs and
// of the keys of the tasks it reads — and holds result.json once (and only once) the task
// finished, written atomically last. A task whose result.json exists is never run again, so a
// flow killed at any moment resumes by running the same graph: finished work is reused,
// unfinished work is redone from a clean folder. A task starts as soon as the tasks it reads
// have finished, not when its whole stage has (OptiKit's future work (ii)).
#pragma once

#include "archive/run_archive.hpp"
#include "flow/task_attempt.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace optkit::flow {

struct TaskResult {
  std::string name;
  std::string key;
  std::filesystem::path dir;
  int exit_code = 0;
  nlohmann::json output; // the command's --format json result (null when it printed none)
  double seconds = 0;    // the successful attempt's wall time
  int attempts = 0;
  bool reused = false; // found finished in the output folder (resume)
};

struct FlowTask {
  std::string name;               // "compress/int_w4a16/t0"
  std::string stage;              // "compress", "gate", ...
  nlohmann::json spec;            // everything that decides the output, for the key
  std::vector<std::string> reads; // names of the tasks whose results it needs
  // The command line (after `optkit` and its global flags), given the task's folder and the
  // results of the tasks it reads.
  std::function<std::vector<std::string>(const std::filesystem::path& dir,
                                         const std::map<std::string, TaskResult>& results)>
      command;
  std::set<int> finished_exits = {0}; // exit codes that are an outcome, not a failure
  bool announce_start = false;        // a long task: progress says when it starts, not only when it ends
};

struct GraphOptions {
  std::filesystem::path work_dir; // task folders live here
  std::filesystem::path executable;
  std::vector<std::string> global_args; // --archive ..., -q
  int slots = 2;
  int retries = 1;     // extra attempts after exit 3 or a signal
  SlurmSettings slurm; // enabled: every attempt an sbatch job instead of a child of this process
  archive::RunArchive* archive = nullptr;
  std::int64_t run_id = 0;
  std::int64_t first_trial_index = 0;        // archive trial index of the first task (graphs of one run follow on)
  std::map<std::string, TaskResult> earlier; // results of graphs run before this one, readable by its tasks
  // Called when a task that announces its start, or a retry of any task, starts: progress.
  std::function<void(const std::string& task, int attempt)> on_started;
  // Called when a task finished (or was found finished), for progress.
  std::function<void(const TaskResult&, std::size_t done, std::size_t total)> on_finished;
};

struct GraphOutcome {
  std::map<std::string, TaskResult> finished;
  std::map<std::string, std::string> failed; // name → why (a failure past its retries, or a failed input)
  double wall_s = 0;
  double busy_slot_s = 0; // Σ task attempt time
  double idle_gap_s = 0;  // time with no child running: the graph's own work
};

// Content key of a task: sha256 over its stage, spec and the keys of the tasks it reads.
std::string task_key(const FlowTask& task, const std::map<std::string, std::string>& keys_by_name);

// Runs every task not yet finished, at most `slots` at once. A task whose input failed is not
// run and is reported failed. Throws Interrupted (children stopped) on Ctrl-C/SIGTERM.
GraphOutcome run_task_graph(const std::vector<FlowTask>& tasks, const GraphOptions& options);

} // namespace optkit::flow
