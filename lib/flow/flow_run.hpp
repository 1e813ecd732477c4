// optkit flow run / resume: the job's stages as one resumable graph of child processes —
// compression trials and the baseline evaluation, each trial's quality gate as soon as its model
// exists, the simulator study beside them; then the representative model (best gate margin,
// ties by calibration loss), its SLO certification and the live study; then the package.
#pragma once

#include "archive/run_context.hpp"
#include "bench/certification.hpp"
#include "core/table.hpp"
#include "flow/flow_job.hpp"
#include "flow/schedule_model.hpp"
#include "flow/task_graph.hpp"
#include "tune/tune_run.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace optkit::flow {

// Where a compression trial ended: its gate passed or failed, or it failed before a gate decision
// (its compression or its evaluation; `failure` says why).
enum class TrialVerdict { passed, failed_gate, failed };

struct CompressTrial {
  std::string recipe;
  int trial = 0;
  std::uint64_t seed = 0;
  std::string task; // the compress task's name
  std::filesystem::path model;
  std::optional<double> calibration_loss;
  std::optional<double> compression_ratio;
  TrialVerdict verdict = TrialVerdict::failed;
  std::string failure;               // why, when it failed before its gate decision
  std::optional<double> gate_margin; // smallest (observed − bound) over the rules, in the rule's direction
  std::vector<std::string> gate_lines;
  // Score, baseline score and recovery with its bootstrap interval of each metric a rule reads.
  std::vector<std::string> quality;
};

// "passed", "failed gate", "failed: <why>".
std::string status_text(const CompressTrial& trial);

struct StageTime {
  std::string stage;
  int tasks = 0;
  int reused = 0;
  double slot_seconds = 0; // Σ task time: OptiKit's Figure 5 (GPU-hours on a GPU box)
};

// How a flow ended: its model packaged; or stopped because no trial passed the quality gate, or
// because the chosen model cannot meet the SLOs (exit 1 either way).
enum class FlowStatus { packaged, gate_failed, slo_infeasible };
std::string to_string(FlowStatus status); // "packaged", "gate failed", "SLO infeasible"

struct FlowOutcome {
  FlowStatus status = FlowStatus::packaged;
  std::string message;
  std::filesystem::path output;
  std::filesystem::path package; // set when packaged
  std::vector<CompressTrial> trials;
  std::optional<std::size_t> chosen;                  // index into trials
  std::optional<bench::Certification> bench;          // of the chosen model
  std::optional<bench::Certification> bench_baseline; // of the uncompressed model (bench.baseline: true)
  std::optional<tune::TuneResult> tune_sim, tune_live;
  // The charts each stage drew (SVG text, from its task folder's plots/): bench's latency vs
  // rate, steady state, CDFs and timeline; each study's trajectory and Pareto front.
  std::vector<std::string> bench_charts, tune_sim_charts, tune_live_charts;
  std::vector<StageTime> stages;
  std::vector<std::int64_t> stage_runs; // archive runs of every stage child, for the lineage
  double wall_s = 0;
  double children_wall_s = 0; // wall time with at least one child running
  double orchestration_s = 0; // wall time with no child running: the flow's own work (choosing, packaging)
  double busy_slot_s = 0;     // Σ child time
  int slots = 0;
  int reused_tasks = 0;
  // The first wave replayed from its measured task times: as run, and with OptiKit's barrier.
  ScheduleReplay first_wave_streaming;
  ScheduleReplay first_wave_barrier;
};

// Runs (or resumes: finished tasks are reused from the output folder) the whole flow. A flow
// whose gate no trial passes stops before any bench (status "gate failed"); a certification that
// is infeasible stops before tuning (status "SLO infeasible"); either way the outcome says why and
// exit_for() turns it into exit 1. RuntimeFailure when a stage failed past its retries;
// Interrupted on Ctrl-C. `progress` gets a line as each task starts and ends.
using FlowProgress = std::function<void(const std::string& line)>;
FlowOutcome run_flow(const FlowJob& job, const archive::RunContext& context, const FlowProgress& progress = {});

// Throws GoalNotMet with the outcome's message unless the flow packaged its model.
void exit_for(const FlowOutcome& outcome);

// The flow's output folder from a flow run in the archive, or the folder itself.
std::filesystem::path resolve_flow_output(const std::string& run_or_folder, archive::RunArchive& archive);

// The job saved in an output folder by run_flow (job.json), for resume and status.
FlowJob load_saved_job(const std::filesystem::path& output);

nlohmann::json to_json(const FlowOutcome& outcome);
// One row per compression trial: recipe, seed, calibration loss, gate margin, status, chosen.
Table trials_table(const FlowOutcome& outcome);

} // namespace optkit::flow
