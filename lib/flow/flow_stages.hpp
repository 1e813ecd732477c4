// The flow's stage work as tasks of the graph, each an optkit subcommand with the job's settings:
// the first wave (baseline evaluation, compression trials, each trial's gate, the simulator
// study), the certifications (the chosen model, optionally the uncompressed one) and the live
// study. What a task's spec holds decides its content key, so it names every input of its output.
#pragma once

#include "flow/flow_job.hpp"
#include "flow/task_graph.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace optkit::flow {

// "compress/int_w8a8/t0", "gate/int_w8a8/t0": a trial's tasks.
std::string compress_name(const std::string& recipe, int trial);
std::string gate_name(const std::string& recipe, int trial);

// The model folder a finished compress task wrote.
std::filesystem::path model_of(const std::map<std::string, TaskResult>& results, const std::string& compress_task);

// `archive` is the run archive the tasks record in. The baseline evaluation's output is a run id
// there, which the gates compare against, so the baseline's key names the archive: an output
// folder resumed with another archive evaluates the baseline again instead of handing the gates a
// run id that means something else (or nothing) in this one.
std::vector<FlowTask> first_wave(const FlowJob& job, const std::filesystem::path& archive);
// `name` certifies `model_task`'s model, or the job's own model when `model_task` is empty.
FlowTask bench_task(const FlowJob& job, const std::string& name, const std::string& model_task);
// The live study of the chosen model, when the job has one.
std::vector<FlowTask> live_wave(const FlowJob& job, const std::string& chosen_task);

} // namespace optkit::flow
