#include "flow/flow_stages.hpp"

#include "core/input_file.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace optkit::flow {

namespace fs = std::filesystem;

namespace {

std::string
threads_arg(const FlowJob& job) {
  return std::to_string(job.threads);
}

// Identity of the input model without hashing gigabytes on every resume: each file's name,
// size and modification time.
nlohmann::json
model_fingerprint(const fs::path& folder) {
  nlohmann::json files = nlohmann::json::object();
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(folder))
    if (e.is_regular_file())
      entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  for (const auto& p : entries)
    files[p.filename().string()] = {fs::file_size(p),
                                    static_cast<std::int64_t>(fs::last_write_time(p).time_since_epoch().count())};
  return {{"path", folder.string()}, {"files", files}};
}

} // namespace

std::string
compress_name(const std::string& recipe, int trial) {
  return fmt::format("compress/{}/t{}", fs::path(recipe).stem().string(), trial);
}

std::string
gate_name(const std::string& recipe, int trial) {
  return fmt::format("gate/{}/t{}", fs::path(recipe).stem().string(), trial);
}

// The model folder a finished compress task wrote.
fs::path
model_of(const std::map<std::string, TaskResult>& results, const std::string& compress_task) {
  return results.at(compress_task).dir / "model";
}

namespace {

// A tuning study: on the simulator (no model task), or on serve-deltas serving `model_task`'s model.
FlowTask
study_task(const FlowJob& job, const TuneStudy& study, const std::string& name, const std::string& model_task,
           std::vector<std::string> reads) {
  const bool live = !model_task.empty();
  FlowTask t;
  t.name = name;
  t.stage = "tune";
  t.reads = std::move(reads);
  t.spec = {{"space", study.space},
            {"optimizer", study.optimizer},
            {"trials", study.trials},
            {"objective", study.objective},
            {"slo", study.objective == "certified" ? job.bench.slos : std::vector<std::string>{}},
            {"engine_args", live ? job.live_engine_args : std::vector<std::string>{}},
            {"max_dispatch_lag_ms", live ? job.bench.max_dispatch_lag_ms : 0.0},
            {"seed", job.compress.seed}};
  t.finished_exits = {0, 1}; // 1: no configuration met the SLO — an outcome
  t.announce_start = live;
  t.command = [job, study, model_task, live](const fs::path& dir, const std::map<std::string, TaskResult>& results) {
    std::vector<std::string> argv = {"tune", "--engine", live ? "optkit" : "sim", "--svg", (dir / "plots").string()};
    if (live)
      argv.insert(argv.end(), {"--model", model_of(results, model_task).string()});
    if (live && job.bench.max_dispatch_lag_ms > 0)
      argv.insert(argv.end(), {"--max-dispatch-lag-ms", fmt::format("{}", job.bench.max_dispatch_lag_ms)});
    argv.insert(argv.end(),
                {"--space", study.space, "--optimizer", study.optimizer, "--trials", std::to_string(study.trials),
                 "--seed", std::to_string(job.compress.seed), "--format", "json"});
    if (study.objective != "goodput") {
      argv.insert(argv.end(), {"--objective", study.objective});
      for (const auto& slo : job.bench.slos)
        argv.insert(argv.end(), {"--slo", slo});
    }
    if (live)
      for (const auto& a : job.live_engine_args)
        argv.push_back("--engine-arg=" + a);
    return argv;
  };
  return t;
}

} // namespace

std::vector<FlowTask>
first_wave(const FlowJob& job, const fs::path& archive) {
  std::vector<FlowTask> tasks;
  const nlohmann::json model = model_fingerprint(job.model);
  std::vector<std::string> limit;
  if (job.gate.limit > 0)
    limit = {"--limit", std::to_string(job.gate.limit)};

  FlowTask baseline;
  baseline.name = "baseline";
  baseline.stage = "evaluate";
  baseline.spec = {{"model", model},
                   {"suite", job.gate.suite},
                   {"limit", job.gate.limit},
                   {"threads", job.threads},
                   {"archive", fs::weakly_canonical(archive).string()}};
  baseline.command = [job, limit](const fs::path&, const std::map<std::string, TaskResult>&) {
    std::vector<std::string> argv = {"eval",       "tasks",     "--model",        job.model,  "--suite", job.gate.suite,
                                     "--no-cache", "--threads", threads_arg(job), "--format", "json"};
    argv.insert(argv.end(), limit.begin(), limit.end());
    return argv;
  };
  tasks.push_back(baseline);

  if (job.tune_sim.enabled) {
    tasks.push_back(study_task(job, job.tune_sim, "tune-sim", "", {}));
  }

  for (const auto& recipe : job.compress.recipes) {
    for (int t = 0; t < job.compress.trials; ++t) {
      const std::uint64_t seed = job.compress.seed + static_cast<std::uint64_t>(t);
      FlowTask c;
      c.name = compress_name(recipe, t);
      c.stage = "compress";
      c.spec = {{"model", model},
                {"sampler", job.compress.sampler},
                {"recipe", recipe},
                {"calib", job.compress.calib},
                {"samples", job.compress.samples},
                {"seq_len", job.compress.seq_len},
                {"seed", seed},
                {"threads", job.threads}};
      c.command = [job, recipe, seed](const fs::path& dir, const std::map<std::string, TaskResult>&) {
        std::vector<std::string> argv = {"compress",
                                         "--model",
                                         job.model,
                                         "--recipe",
                                         recipe,
                                         "--seed",
                                         std::to_string(seed),
                                         "--threads",
                                         threads_arg(job),
                                         "-o",
                                         (dir / "model").string(),
                                         "--format",
                                         "json"};
        if (!job.compress.sampler.empty())
          argv.insert(argv.end(), {"--sampler", job.compress.sampler});
        if (!job.compress.calib.empty())
          argv.insert(argv.end(), {"--calib", job.compress.calib, "--samples", std::to_string(job.compress.samples),
                                   "--seq-len", std::to_string(job.compress.seq_len)});
        return argv;
      };
      tasks.push_back(c);

      FlowTask g;
      g.name = gate_name(recipe, t);
      g.stage = "gate";
      g.reads = {c.name, "baseline"};
      g.spec = {{"suite", job.gate.suite},
                {"rules", read_input_file(job.gate.gate)},
                {"limit", job.gate.limit},
                {"threads", job.threads}};
      g.finished_exits = {0, 1}; // 1: the gate failed — an outcome, recorded, not retried
      const std::string compress_task = c.name;
      g.command = [job, limit, compress_task](const fs::path&, const std::map<std::string, TaskResult>& results) {
        const auto baseline_run = results.at("baseline").output.at("run_id").get<std::int64_t>();
        std::vector<std::string> argv = {
            "eval",           "tasks",        "--model",    model_of(results, compress_task).string(),
            "--suite",        job.gate.suite, "--baseline", std::to_string(baseline_run),
            "--gate",         job.gate.gate,  "--no-cache", "--threads",
            threads_arg(job), "--format",     "json"};
        argv.insert(argv.end(), limit.begin(), limit.end());
        return argv;
      };
      tasks.push_back(g);
    }
  }
  return tasks;
}

// `bench` certifies the chosen model; `bench-baseline` (bench.baseline: true) the uncompressed
// one, for the report's comparison. `model` is empty for the job's own model.
FlowTask
bench_task(const FlowJob& job, const std::string& name, const std::string& model_task) {
  FlowTask b;
  b.name = name;
  b.stage = "bench";
  if (!model_task.empty())
    b.reads = {model_task};
  b.spec = {{"profile", job.bench.profile},
            {"max_dispatch_lag_ms", job.bench.max_dispatch_lag_ms},
            {"slo", job.bench.slos},
            {"engine_args", job.bench.engine_args},
            {"min_trial_seconds", job.bench.min_trial_seconds},
            {"max_trial_seconds", job.bench.max_trial_seconds},
            {"max_trials", job.bench.max_trials},
            {"beta_tolerance", job.bench.beta_tolerance}};
  if (model_task.empty())
    b.spec["model"] = model_fingerprint(job.model);
  b.finished_exits = {0, 1}; // 1: infeasible — an outcome
  b.announce_start = true;
  b.command = [job, model_task](const fs::path& dir, const std::map<std::string, TaskResult>& results) {
    const std::string model = model_task.empty() ? job.model : model_of(results, model_task).string();
    std::vector<std::string> argv = {"bench",
                                     "--engine",
                                     "optkit",
                                     "--model",
                                     model,
                                     "--profile",
                                     job.bench.profile,
                                     "--min-trial-seconds",
                                     fmt::format("{}", job.bench.min_trial_seconds),
                                     "--max-trial-seconds",
                                     fmt::format("{}", job.bench.max_trial_seconds),
                                     "--max-trials",
                                     std::to_string(job.bench.max_trials),
                                     "--beta-tolerance",
                                     fmt::format("{}", job.bench.beta_tolerance),
                                     "--no-calibration",
                                     "--svg",
                                     (dir / "plots").string(),
                                     "--format",
                                     "json"};
    for (const auto& slo : job.bench.slos)
      argv.insert(argv.end(), {"--slo", slo});
    if (job.bench.max_dispatch_lag_ms > 0)
      argv.insert(argv.end(), {"--max-dispatch-lag-ms", fmt::format("{}", job.bench.max_dispatch_lag_ms)});
    for (const auto& a : job.bench.engine_args)
      argv.push_back("--engine-arg=" + a);
    return argv;
  };
  return b;
}

std::vector<FlowTask>
live_wave(const FlowJob& job, const std::string& chosen_task) {
  std::vector<FlowTask> tasks;
  if (job.tune_live.enabled) {
    tasks.push_back(study_task(job, job.tune_live, "tune-live", chosen_task, {chosen_task, "bench"}));
  }
  return tasks;
}

} // namespace optkit::flow
