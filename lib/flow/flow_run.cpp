#include "flow/flow_run.hpp"

#include "bench/bench_report.hpp"
#include "compress/compress_run.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/log.hpp"
#include "eval/task_report.hpp"
#include "flow/flow_package.hpp"
#include "flow/flow_stages.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace optkit::flow {

namespace fs = std::filesystem;

namespace {

// The SVG charts a finished task drew into its plots/ folder, in the order named (missing ones
// skipped: a gate that failed draws no trial's charts).
std::vector<std::string>
charts_of(const TaskResult& task, std::initializer_list<const char*> names) {
  std::vector<std::string> charts;
  for (const char* name : names)
    if (const auto file = task.dir / "plots" / name; fs::is_regular_file(file))
      charts.push_back(read_input_file(file));
  return charts;
}

const std::initializer_list<const char*> kBenchCharts = {"latency_vs_rate.svg", "steady_state.svg", "latency_cdf.svg",
                                                         "timeline.svg"};
const std::initializer_list<const char*> kTuneCharts = {"trajectory.svg", "pareto.svg"};

// Smallest margin over the gate's rules, positive when every rule holds with room to spare.
std::optional<double>
gate_margin(const eval::GateReport& gate) {
  std::optional<double> margin;
  for (const auto& rule : gate.rules) {
    if (!std::isfinite(rule.observed))
      continue;
    const bool at_least = rule.kind.starts_with("min_");
    const double m = at_least ? rule.observed - rule.bound : rule.bound - rule.observed;
    margin = margin ? std::min(*margin, m) : m;
  }
  return margin;
}

// "arith exact_match,strict-match 0.650 vs 0.675, recovery 0.963 [0.833, 1.087]" for each metric
// the gate's rules read.
std::vector<std::string>
quality_lines(const eval::GateReport& gate) {
  std::vector<std::string> out;
  for (const auto& rule : gate.rules)
    for (const auto& s : gate.scores) {
      if (s.suite != rule.rule.suite || s.metric != rule.rule.metric || !s.recovery)
        continue;
      std::string line =
          fmt::format("{} {} {:.3f} vs {:.3f}, recovery {:.3f}", s.suite, s.metric, s.score, s.baseline, *s.recovery);
      if (s.recovery_low && s.recovery_high)
        line += fmt::format(" [{:.3f}, {:.3f}]", *s.recovery_low, *s.recovery_high);
      out.push_back(line);
    }
  return out;
}

// Where a flow task's result is named in errors: "flow task gate-int_w8a8-0".
std::string
task_source(const std::string& name) {
  return "flow task " + name;
}

void
add_stage_runs(FlowOutcome& outcome, const std::map<std::string, TaskResult>& finished) {
  for (const auto& [name, r] : finished)
    if (r.output.is_object() && r.output.contains("run_id"))
      outcome.stage_runs.push_back(r.output.at("run_id").get<std::int64_t>());
}

void
add_graph(FlowOutcome& outcome, const GraphOutcome& graph, const std::vector<FlowTask>& tasks) {
  outcome.children_wall_s += graph.wall_s - graph.idle_gap_s;
  outcome.busy_slot_s += graph.busy_slot_s;
  for (const auto& task : tasks) {
    auto it = std::find_if(outcome.stages.begin(), outcome.stages.end(),
                           [&](const StageTime& s) { return s.stage == task.stage; });
    if (it == outcome.stages.end()) {
      outcome.stages.push_back({task.stage, 0, 0, 0});
      it = outcome.stages.end() - 1;
    }
    ++it->tasks;
    if (const auto f = graph.finished.find(task.name); f != graph.finished.end()) {
      it->slot_seconds += f->second.seconds;
      if (f->second.reused) {
        ++it->reused;
        ++outcome.reused_tasks;
      }
    }
  }
  add_stage_runs(outcome, graph.finished);
}

void
replay_first_wave(FlowOutcome& outcome, const std::vector<FlowTask>& wave, const GraphOutcome& graph, int slots) {
  std::vector<ModelTask> tasks;
  for (const auto& t : wave) {
    const auto f = graph.finished.find(t.name);
    if (f == graph.finished.end())
      return; // a failed task has no duration to replay
    tasks.push_back({t.name, f->second.seconds, t.stage == "gate" ? 1 : 0, t.reads});
  }
  outcome.first_wave_streaming = replay_schedule(tasks, slots, false);
  outcome.first_wave_barrier = replay_schedule(tasks, slots, true);
}

void
finish_timing(FlowOutcome& outcome, double start) {
  outcome.wall_s = SystemClock::instance().monotonic_seconds() - start;
  outcome.orchestration_s = std::max(0.0, outcome.wall_s - outcome.children_wall_s);
}

// A failed task that the flow cannot do without: RuntimeFailure naming it and why.
void
require(const GraphOutcome& graph, const std::string& name) {
  if (const auto it = graph.failed.find(name); it != graph.failed.end())
    throw RuntimeFailure(fmt::format("flow task {} failed: {}", name, it->second));
}

} // namespace

namespace {

// How the flow's task graphs run: its children's command line, slots, retries, executor, the
// archive, and a progress line as each task starts and ends.
GraphOptions
graph_options(const FlowJob& job, const archive::RunContext& context, const fs::path& work,
              const FlowProgress& progress) {
  GraphOptions options;
  options.work_dir = work;
  options.executable = context.executable;
  options.global_args = context.global_args;
  options.global_args.push_back("-q");
  options.slots = job.slots;
  options.retries = job.retries;
  options.slurm = {job.executor == "slurm", job.partition, job.sbatch_args, 0.5};
  options.archive = context.archive;
  options.run_id = context.run_id;
  if (!progress)
    return options;
  options.on_finished = [progress](const TaskResult& r, std::size_t done, std::size_t total) {
    progress(fmt::format("flow [{}/{}] {} {} ({:.1f} s{})", done, total, r.name,
                         r.exit_code == 0 ? "done" : fmt::format("exit {}", r.exit_code), r.seconds,
                         r.reused ? ", reused" : ""));
  };
  options.on_started = [progress](const std::string& task, int attempt) {
    progress(fmt::format("flow: {} started{}", task, attempt > 1 ? fmt::format(" (attempt {})", attempt) : ""));
  };
  return options;
}

// Trial `t` of `recipe` as the first wave left it: compressed or not, gated or not; the gate
// rules it failed join `failed_rules`.
CompressTrial
compress_trial(const FlowJob& job, const std::string& recipe, int t, const GraphOutcome& g1,
               std::set<std::string>& failed_rules) {
  CompressTrial trial;
  trial.recipe = fs::path(recipe).stem().string();
  trial.trial = t;
  trial.seed = job.compress.seed + static_cast<std::uint64_t>(t);
  trial.task = compress_name(recipe, t);
  const auto c = g1.finished.find(trial.task);
  if (c == g1.finished.end()) {
    trial.failure = g1.failed.at(trial.task);
    return trial;
  }
  trial.model = c->second.dir / "model";
  const auto compressed = compress::compress_result_from_json(c->second.output, task_source(trial.task));
  trial.calibration_loss = compress::summary_mean(compressed, "calibration_loss");
  trial.compression_ratio = compress::summary_mean(compressed, "compression_ratio");
  const std::string gate_task = gate_name(recipe, t);
  const auto g = g1.finished.find(gate_task);
  if (g == g1.finished.end()) {
    trial.failure = "evaluation: " + g1.failed.at(gate_task);
    return trial;
  }
  const auto gate = eval::gate_report_from_json(g->second.output, task_source(gate_task));
  if (!gate) {
    trial.failure = "evaluation printed no gate result";
    return trial;
  }
  trial.gate_margin = gate_margin(*gate);
  trial.quality = quality_lines(*gate);
  for (const auto& rule : gate->rules) {
    trial.gate_lines.push_back(rule.line());
    if (!rule.passed)
      failed_rules.insert(rule.line());
  }
  trial.verdict = g->second.exit_code == 0 ? TrialVerdict::passed : TrialVerdict::failed_gate;
  return trial;
}

// The representative: best gate margin, ties by calibration loss, then by trial order.
std::optional<std::size_t>
representative(const std::vector<CompressTrial>& trials) {
  std::optional<std::size_t> chosen;
  for (std::size_t i = 0; i < trials.size(); ++i) {
    const auto& t = trials[i];
    if (t.verdict != TrialVerdict::passed)
      continue;
    if (!chosen) {
      chosen = i;
      continue;
    }
    const auto& best = trials[*chosen];
    const double m = t.gate_margin.value_or(0), bm = best.gate_margin.value_or(0);
    const double loss = t.calibration_loss.value_or(0), bloss = best.calibration_loss.value_or(0);
    if (m > bm + 1e-12 || (std::abs(m - bm) <= 1e-12 && loss < bloss))
      chosen = i;
  }
  return chosen;
}

// Why a certification that did not pass ends the flow: no rate can work only when the
// closed-loop gate (one request at a time) failed; a search that ran out of trials has only not
// found one yet.
std::string
infeasible_message(const FlowOutcome& outcome) {
  const auto& certification = *outcome.bench;
  const std::string why = certification.binding.empty() ? "" : ": " + certification.binding;
  const auto& chosen = outcome.trials[*outcome.chosen];
  if (certification.stop_code == bench::StopCode::gate_failed)
    return fmt::format("the chosen model ({} trial {}) cannot meet the SLOs at any rate{}", chosen.recipe, chosen.trial,
                       why);
  return fmt::format("the chosen model ({} trial {}) met the SLOs at no rate bench tried ({}){}; raise "
                     "bench.max_trials or relax bench.slo",
                     chosen.recipe, chosen.trial, certification.stop_reason, why);
}

} // namespace

FlowOutcome
run_flow(const FlowJob& job, const archive::RunContext& context, const FlowProgress& progress) {
  FlowOutcome outcome;
  outcome.output = job.output;
  outcome.slots = job.slots;
  const fs::path work = fs::path(job.output) / "work";
  fs::create_directories(work);
  write_file_atomic(fs::path(job.output) / "job.json", to_json(job).dump(2) + "\n");
  if (context.recording())
    context.archive->add_event(context.run_id, std::nullopt, "info", "flow-output", job.output,
                               {{"output", job.output}});
  GraphOptions options = graph_options(job, context, work, progress);
  const double start = SystemClock::instance().monotonic_seconds();

  // Wave 1: compression trials, the baseline, each trial's gate, the simulator study.
  const auto wave1 = first_wave(job, context.archive->path());
  const GraphOutcome g1 = run_task_graph(wave1, options);
  add_graph(outcome, g1, wave1);
  replay_first_wave(outcome, wave1, g1, job.slots);
  require(g1, "baseline");
  if (job.tune_sim.enabled) {
    require(g1, "tune-sim");
    outcome.tune_sim = tune::tune_result_from_json(g1.finished.at("tune-sim").output, task_source("tune-sim"));
    outcome.tune_sim_charts = charts_of(g1.finished.at("tune-sim"), kTuneCharts);
  }
  std::set<std::string> failed_rules;
  for (const auto& recipe : job.compress.recipes)
    for (int t = 0; t < job.compress.trials; ++t)
      outcome.trials.push_back(compress_trial(job, recipe, t, g1, failed_rules));
  outcome.chosen = representative(outcome.trials);
  const bool any_gated = std::any_of(outcome.trials.begin(), outcome.trials.end(),
                                     [](const CompressTrial& t) { return t.verdict != TrialVerdict::failed; });
  if (!any_gated) // nothing reached a gate decision: a failure of the machinery, not of the models
    throw RuntimeFailure(fmt::format("every compression trial failed before its gate decision; trial {} {}: {}",
                                     outcome.trials.front().recipe, outcome.trials.front().trial,
                                     status_text(outcome.trials.front())));
  if (!outcome.chosen) {
    outcome.status = FlowStatus::gate_failed;
    std::vector<std::string> lines(failed_rules.begin(), failed_rules.end());
    outcome.message = fmt::format("no compression trial passed the quality gate {} (no bench was run): {}",
                                  job.gate.gate, fmt::join(lines, "; "));
    finish_timing(outcome, start);
    return outcome;
  }

  // Wave 2: certifications one at a time (two servers at once would measure each other), before
  // the live study: tuning is only worth it for a model that can meet its SLOs.
  options.earlier = g1.finished;
  options.first_trial_index = static_cast<std::int64_t>(wave1.size());
  const std::string chosen_task = outcome.trials[*outcome.chosen].task;
  std::vector<FlowTask> certify = {bench_task(job, "bench", chosen_task)};
  if (job.bench.baseline)
    certify.push_back(bench_task(job, "bench-baseline", ""));
  auto certify_options = options;
  certify_options.slots = 1;
  const GraphOutcome g2 = run_task_graph(certify, certify_options);
  add_graph(outcome, g2, certify);
  require(g2, "bench");
  outcome.bench = bench::certification_from_json(g2.finished.at("bench").output, task_source("bench"));
  outcome.bench_charts = charts_of(g2.finished.at("bench"), kBenchCharts);
  if (job.bench.baseline) {
    require(g2, "bench-baseline");
    outcome.bench_baseline =
        bench::certification_from_json(g2.finished.at("bench-baseline").output, task_source("bench-baseline"));
  }
  if (g2.finished.at("bench").exit_code != 0) {
    outcome.status = FlowStatus::slo_infeasible;
    outcome.message = infeasible_message(outcome);
    finish_timing(outcome, start);
    return outcome;
  }

  // Wave 3: the live study on the chosen model.
  const auto live = live_wave(job, chosen_task);
  if (!live.empty()) {
    for (const auto& [name, r] : g2.finished)
      options.earlier[name] = r;
    options.first_trial_index += static_cast<std::int64_t>(certify.size());
    const GraphOutcome g3 = run_task_graph(live, options);
    add_graph(outcome, g3, live);
    require(g3, "tune-live");
    outcome.tune_live = tune::tune_result_from_json(g3.finished.at("tune-live").output, task_source("tune-live"));
    outcome.tune_live_charts = charts_of(g3.finished.at("tune-live"), kTuneCharts);
  }

  outcome.status = FlowStatus::packaged;
  finish_timing(outcome, start); // the report's figures: everything but writing the package itself
  outcome.package = write_package(job, outcome, *context.archive);
  finish_timing(outcome, start);
  outcome.message = fmt::format("package ready: {} (report: {})", outcome.package.string(),
                                (outcome.package / "report.html").string());
  return outcome;
}

std::string
status_text(const CompressTrial& trial) {
  switch (trial.verdict) {
  case TrialVerdict::passed:
    return "passed";
  case TrialVerdict::failed_gate:
    return "failed gate";
  case TrialVerdict::failed:
    break;
  }
  return "failed: " + trial.failure;
}

std::string
to_string(FlowStatus status) {
  switch (status) {
  case FlowStatus::packaged:
    return "packaged";
  case FlowStatus::gate_failed:
    return "gate failed";
  case FlowStatus::slo_infeasible:
    break;
  }
  return "SLO infeasible";
}

void
exit_for(const FlowOutcome& outcome) {
  if (outcome.status != FlowStatus::packaged)
    throw GoalNotMet(outcome.message);
}

fs::path
resolve_flow_output(const std::string& run_or_folder, archive::RunArchive& archive) {
  if (fs::is_directory(run_or_folder))
    return fs::absolute(run_or_folder);
  const std::int64_t run_id = archive.resolve_run(run_or_folder);
  const auto run = archive.find_run(run_id);
  if (!run || run->command.rfind("flow", 0) != 0)
    throw InputError(
        fmt::format("run {} is not a flow run: give a flow run id or the flow's output folder", run_or_folder));
  for (const auto& event : archive.load_run(run_id).events)
    if (event.kind == "flow-output")
      return event.data.at("output").get<std::string>();
  throw InputError(fmt::format("run {} records no output folder (it stopped before reading its job)", run_or_folder));
}

FlowJob
load_saved_job(const fs::path& output) {
  const fs::path file = output / "job.json";
  if (!fs::is_regular_file(file))
    throw InputError(
        fmt::format("{}: no flow ran here (no job.json): give the output folder of a flow run", output.string()));
  try {
    return flow_job_from_json(read_json_file(file));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", file.string(), e.what()));
  }
}

nlohmann::json
to_json(const FlowOutcome& o) {
  nlohmann::json trials = nlohmann::json::array();
  for (std::size_t i = 0; i < o.trials.size(); ++i) {
    const auto& t = o.trials[i];
    trials.push_back(
        {{"recipe", t.recipe},
         {"trial", t.trial},
         {"seed", t.seed},
         {"model", t.model.string()},
         {"calibration_loss", t.calibration_loss ? nlohmann::json(*t.calibration_loss) : nlohmann::json()},
         {"compression_ratio", t.compression_ratio ? nlohmann::json(*t.compression_ratio) : nlohmann::json()},
         {"status", status_text(t)},
         {"gate_margin", t.gate_margin ? nlohmann::json(*t.gate_margin) : nlohmann::json()},
         {"gate", t.gate_lines},
         {"quality", t.quality},
         {"chosen", o.chosen && *o.chosen == i}});
  }
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : o.stages)
    stages.push_back({{"stage", s.stage}, {"tasks", s.tasks}, {"reused", s.reused}, {"slot_seconds", s.slot_seconds}});
  return {{"status", to_string(o.status)},
          {"message", o.message},
          {"output", o.output.string()},
          {"package", o.package.empty() ? nlohmann::json() : nlohmann::json(o.package.string())},
          {"trials", trials},
          {"certified_rate", o.bench ? nlohmann::json(o.bench->certified_rate) : nlohmann::json()},
          {"stages", stages},
          {"wall_s", o.wall_s},
          {"busy_slot_s", o.busy_slot_s},
          {"orchestration_s", o.orchestration_s},
          {"slots", o.slots},
          {"reused_tasks", o.reused_tasks},
          {"first_wave",
           {{"streaming_s", o.first_wave_streaming.makespan_s},
            {"streaming_idle", o.first_wave_streaming.idle_fraction},
            {"barrier_s", o.first_wave_barrier.makespan_s},
            {"barrier_idle", o.first_wave_barrier.idle_fraction}}},
          {"stage_runs", o.stage_runs}};
}

Table
trials_table(const FlowOutcome& o) {
  Table table({"recipe", "trial", "seed", "calibration loss", "gate margin", "status", "chosen"});
  for (std::size_t i = 0; i < o.trials.size(); ++i) {
    const auto& t = o.trials[i];
    table.add_row({t.recipe, t.trial, t.seed,
                   t.calibration_loss ? nlohmann::json(*t.calibration_loss) : nlohmann::json(),
                   t.gate_margin ? nlohmann::json(*t.gate_margin) : nlohmann::json(), status_text(t),
                   o.chosen && *o.chosen == i ? "*" : ""});
  }
  return table;
}

} // namespace optkit::flow
