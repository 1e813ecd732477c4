#include "tune/tune_run.hpp"

#include "bench/slo.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "core/json_fields.hpp"
#include "core/svg_chart.hpp"
#include "core/text.hpp"
#include "sim/sim_config.hpp"
#include "tune/live_evaluator.hpp"
#include "tune/sim_evaluator.hpp"
#include "tune/trial_executor.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

namespace optkit::tune {

nlohmann::json
to_json(const TuneOptions& o) {
  return {{"engine", o.engine},
          {"space", o.space},
          {"optimizer", o.optimizer},
          {"trials", o.trials},
          {"seed", o.seed},
          {"objective", o.objective},
          {"lambda", o.lambda},
          {"hw_cost", o.hw_cost},
          {"slos", o.slos},
          {"slo_s", o.slo_s ? nlohmann::json(*o.slo_s) : nlohmann::json(nullptr)},
          {"sim", o.sim},
          {"prior", o.prior},
          {"prior_trials", o.prior_trials},
          {"prior_top", o.prior_top},
          {"tpe",
           {{"startup_trials", o.tpe.startup_trials},
            {"ei_candidates", o.tpe.ei_candidates},
            {"gamma", o.tpe.gamma},
            {"prior_weight", o.tpe.prior_weight}}},
          {"hillclimb", {{"start", o.hillclimb.start}, {"delta", o.hillclimb.delta}, {"steps", o.hillclimb.steps}}},
          {"grid_points", o.grid_points},
          {"top_k", o.top_k},
          {"replicates", o.replicates},
          {"baseline", o.baseline},
          {"executor", o.executor},
          {"slots", o.slots},
          {"gpus", o.gpus},
          {"partition", o.partition},
          {"sbatch_args", o.sbatch_args},
          {"model", o.model},
          {"engine_executable", o.engine_executable},
          {"engine_args", o.engine_args},
          {"engine_timeout_s", o.engine_timeout_s},
          {"profile", o.profile},
          {"tokenizer", o.tokenizer},
          {"bench_min_trial_s", o.bench_min_trial_s},
          {"bench_max_trials", o.bench_max_trials},
          {"beta_tolerance", o.beta_tolerance},
          {"max_dispatch_lag_ms", o.max_dispatch_lag_ms},
          {"goodput_requests", o.goodput_requests}};
}

TuneOptions
tune_options_from_json(const nlohmann::json& j) {
  TuneOptions o;
  o.engine = j.at("engine");
  o.space = j.at("space");
  o.optimizer = j.at("optimizer");
  o.trials = j.at("trials");
  o.seed = j.at("seed");
  o.objective = j.at("objective");
  o.lambda = j.at("lambda");
  o.hw_cost = j.at("hw_cost").get<std::map<std::string, double>>();
  o.slos = j.at("slos").get<std::vector<std::string>>();
  if (j.at("slo_s").is_number())
    o.slo_s = j.at("slo_s").get<double>();
  o.sim = j.at("sim");
  o.prior = j.value("prior", "");
  o.prior_trials = j.value("prior_trials", 200);
  o.prior_top = j.value("prior_top", 3);
  o.tpe.startup_trials = j.at("tpe").at("startup_trials");
  o.tpe.ei_candidates = j.at("tpe").at("ei_candidates");
  o.tpe.gamma = j.at("tpe").at("gamma");
  o.tpe.prior_weight = j.at("tpe").at("prior_weight");
  o.hillclimb.start = j.at("hillclimb").at("start");
  o.hillclimb.delta = j.at("hillclimb").at("delta");
  o.hillclimb.steps = j.at("hillclimb").at("steps").get<std::map<std::string, double>>();
  o.grid_points = j.at("grid_points");
  o.top_k = j.at("top_k");
  o.replicates = j.at("replicates");
  o.baseline = j.at("baseline");
  o.executor = j.value("executor", "local");
  o.slots = j.value("slots", 1);
  o.gpus = j.value("gpus", std::vector<std::string>{});
  o.partition = j.value("partition", "");
  o.sbatch_args = j.value("sbatch_args", std::vector<std::string>{});
  o.model = j.value("model", "");
  o.engine_executable = j.value("engine_executable", "");
  o.engine_args = j.value("engine_args", std::vector<std::string>{});
  o.engine_timeout_s = j.value("engine_timeout_s", 900.0);
  o.profile = j.value("profile", "chat-small");
  o.tokenizer = j.value("tokenizer", "");
  o.bench_min_trial_s = j.value("bench_min_trial_s", 10.0);
  o.bench_max_trials = j.value("bench_max_trials", 8);
  o.beta_tolerance = j.value("beta_tolerance", 0.02);
  o.max_dispatch_lag_ms = j.value("max_dispatch_lag_ms", 5.0);
  o.goodput_requests = j.value("goodput_requests", std::size_t{200});
  return o;
}

namespace {

constexpr const char* options_event = "tune.options";

std::unique_ptr<Optimizer>
make_optimizer(const TuneOptions& o, const SearchSpace& space) {
  if (o.optimizer == "tpe")
    return make_tpe(space, o.tpe, o.seed);
  if (o.optimizer == "random")
    return make_random_search(space, o.seed);
  if (o.optimizer == "grid")
    return make_grid_search(space, o.grid_points);
  if (o.optimizer == "hillclimb")
    return make_hill_climb(space, o.hillclimb);
  throw InputError("--optimizer '" + o.optimizer + "' is not tpe, hillclimb, random or grid");
}

// The earlier study's options and completed trials.
std::pair<TuneOptions, std::vector<StudyTrial>>
load_study(archive::RunArchive& archive, std::int64_t run_id) {
  const auto detail = archive.load_run(run_id);
  if (detail.run.command != "tune")
    throw InputError(fmt::format("--resume {}: run {} is '{}', not a tune study", run_id, run_id, detail.run.command));
  std::optional<TuneOptions> options;
  for (const auto& e : detail.events)
    if (e.kind == options_event)
      options = tune_options_from_json(e.data);
  if (!options)
    throw InputError(fmt::format("--resume {}: run {} recorded no study options", run_id, run_id));
  std::vector<StudyTrial> trials;
  for (const auto& t : detail.trials) {
    if (t.result.is_null() || !t.params.contains("phase"))
      continue; // running when the study stopped: it runs again
    StudyTrial s;
    s.number = static_cast<int>(t.trial_index);
    s.phase = parse_study_phase(t.params.at("phase").get<std::string>());
    s.config = t.params.at("config");
    s.seed = t.params.value("seed", std::uint64_t{0});
    s.outcome = outcome_from_json(t.result);
    if (s.outcome.status == TrialStatus::interrupted)
      continue;
    trials.push_back(std::move(s));
  }
  return {*options, trials};
}

void
archive_trial(const archive::RunContext& context, const StudyTrial& t, std::int64_t resumed_from) {
  if (!context.recording())
    return;
  auto& a = *context.archive;
  nlohmann::json params = {{"phase", to_string(t.phase)}, {"config", t.config}, {"seed", t.seed}};
  if (t.resumed)
    params["resumed_from"] = resumed_from;
  const auto id = a.begin_trial(context.run_id, t.number, 1, params);
  archive::TrialEnd end;
  end.status = t.outcome.status == TrialStatus::measured      ? archive::TrialStatus::succeeded
               : t.outcome.status == TrialStatus::interrupted ? archive::TrialStatus::interrupted
                                                              : archive::TrialStatus::failed;
  end.error = t.outcome.error;
  end.result = to_json(t.outcome);
  a.finish_trial(id, end);
  if (std::isfinite(t.outcome.value))
    a.add_metric(context.run_id, id, {"value", t.outcome.value, ""});
  for (const auto& [name, value] : t.outcome.metrics.items())
    if (value.is_number())
      a.add_metric(context.run_id, id, {name, value.get<double>(), name.ends_with("_s") ? "s" : ""});
  if (!t.outcome.log.empty() && std::filesystem::exists(t.outcome.log))
    a.add_artifact(context.run_id, id, t.outcome.log, "engine-log");
}

void
write_plots(const TuneResult& r, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  Chart trajectory{fmt::format("{} on {}: best feasible value so far", r.options.optimizer, r.space_name),
                   "trial",
                   r.options.objective == "goodput" ? "score S(K) (Eq. 3)" : "certified rate / TP (Eq. 2)",
                   {},
                   {},
                   {}};
  ChartSeries best{"best so far", "#1f77b4", {}, true, false, false};
  ChartSeries each{"feasible trial", "#2ca02c", {}, false, true, false};
  double so_far = -std::numeric_limits<double>::infinity();
  for (const auto& t : r.study.trials) {
    if (t.phase == StudyPhase::replicate)
      continue;
    if (t.outcome.feasible()) {
      each.points.emplace_back(t.number, std::max(0.0, t.outcome.value));
      so_far = std::max(so_far, t.outcome.value);
    }
    if (std::isfinite(so_far))
      best.points.emplace_back(t.number, std::max(0.0, so_far));
  }
  trajectory.series = {best, each};
  write_file_atomic(dir / "trajectory.svg", render_svg(trajectory));
  if (r.options.objective != "goodput")
    return;
  // Pareto: throughput against p99, with the frontier of configurations no other beats on both.
  Chart pareto{
      "throughput vs p99 (every measured trial)", "p99 end-to-end latency (s)", "throughput (requests/s)", {}, {}, {}};
  ChartSeries points{"trial", "#999", {}, false, true, false};
  for (const auto& t : r.study.trials)
    if (t.outcome.status == TrialStatus::measured && t.outcome.metrics.contains("p99_s"))
      points.points.emplace_back(t.outcome.metrics["p99_s"].get<double>(),
                                 t.outcome.metrics["throughput"].get<double>());
  ChartSeries frontier{"Pareto frontier", "#d62728", {}, true, true, false};
  for (const auto* t : pareto_frontier(r.study))
    frontier.points.emplace_back(t->outcome.metrics["p99_s"].get<double>(),
                                 t->outcome.metrics["throughput"].get<double>());
  pareto.series = {points, frontier};
  if (!r.study.trials.empty() && r.study.trials.front().outcome.metrics.contains("slo_s"))
    pareto.vertical.push_back({r.study.trials.front().outcome.metrics["slo_s"].get<double>(), "SLO"});
  write_file_atomic(dir / "pareto.svg", render_svg(pareto));
}

} // namespace

std::unique_ptr<TrialEvaluator>
make_evaluator(const TuneOptions& options, const SearchSpace& space) {
  ObjectiveOptions objective;
  objective.kind = parse_objective(options.objective);
  objective.lambda = options.lambda;
  objective.hw_cost = options.hw_cost;
  if (options.engine != "sim") {
    LiveEvaluatorOptions live;
    live.kind = engines::parse_engine(options.engine);
    live.model = options.model;
    live.executable = options.engine_executable;
    live.engine_args = options.engine_args;
    live.ready_timeout_s = options.engine_timeout_s;
    live.objective = objective;
    live.slo_s = options.slo_s.value_or(1.2);
    live.goodput_requests = options.goodput_requests;
    auto& b = live.bench;
    b.model = "";
    b.profile = options.profile;
    b.tokenizer = options.tokenizer;
    b.slos = options.slos;
    b.certify.summary.slos = bench::parse_slos(options.slos);
    b.certify.summary.beta_tolerance = options.beta_tolerance;
    b.certify.summary.max_dispatch_lag_s = options.max_dispatch_lag_ms / 1e3;
    b.certify.min_trial_s = options.bench_min_trial_s;
    b.certify.max_trials = options.bench_max_trials;
    return make_live_evaluator(space, std::move(live));
  }
  SimEvaluatorOptions sim;
  sim.setup = sim::resolve_sim_setup(options.sim);
  if (options.slo_s)
    sim.setup.segment.slo_s = *options.slo_s;
  sim.objective = objective;
  sim.certify.summary.slos = bench::parse_slos(options.slos);
  sim.certify.min_trial_s = 60; // virtual seconds
  sim.certify.summary.bootstrap_resamples = 0;
  return make_sim_evaluator(space, std::move(sim));
}

std::vector<nlohmann::json>
simulator_prior(const TuneOptions& options, const SearchSpace& space) {
  if (options.prior.empty())
    return {};
  if (options.optimizer == "hillclimb" || options.optimizer == "grid")
    throw InputError("--prior warm-starts tpe or random; " + options.optimizer + " has its own order");
  TuneOptions simulated = options;
  simulated.engine = "sim";
  simulated.sim = options.prior;
  std::unique_ptr<TrialEvaluator> evaluator;
  try {
    evaluator = make_evaluator(simulated, space);
  } catch (const InputError& e) {
    throw InputError(std::string("--prior ") + options.prior + ": " + e.what());
  }
  auto executor = make_local_executor(*evaluator, 1, {});
  auto optimizer = make_tpe(space, options.tpe, options.seed ^ 0x9d1ce5ULL);
  StudyOptions study;
  study.trials = options.prior_trials;
  study.top_k = 0;
  study.baseline = false;
  study.seed = options.seed;
  const auto result = run_study(space, *optimizer, *evaluator, *executor, study, {}, {});
  std::vector<const StudyTrial*> ranked;
  for (const auto& t : result.trials)
    if (t.outcome.feasible())
      ranked.push_back(&t);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const StudyTrial* a, const StudyTrial* b) { return a->outcome.value > b->outcome.value; });
  std::vector<nlohmann::json> top;
  for (const auto* t : ranked)
    if (static_cast<int>(top.size()) < options.prior_top && std::find(top.begin(), top.end(), t->config) == top.end())
      top.push_back(t->config);
  return top;
}

void
tune_worker(const std::filesystem::path& spec_file) {
  run_trial_worker(spec_file, [](const nlohmann::json& j) {
    const auto options = tune_options_from_json(j);
    static SearchSpace space; // outlives the evaluator, which keeps a reference
    space = resolve_search_space(options.space);
    return make_evaluator(options, space);
  });
}

TuneResult
run_tune(TuneOptions options, const archive::RunContext& context,
         const std::function<void(const StudyTrial&)>& on_trial) {
  TuneResult result;
  std::vector<StudyTrial> previous;
  if (!options.resume.empty()) {
    if (context.archive == nullptr)
      throw InputError("--resume needs the run archive");
    result.resumed_from = context.archive->resolve_run(options.resume);
    auto [earlier, trials] = load_study(*context.archive, result.resumed_from);
    earlier.resume = options.resume;
    earlier.svg_dir = options.svg_dir;
    earlier.emit = options.emit;
    options = earlier;
    previous = std::move(trials);
  }
  result.options = options;
  if (options.trials < 1)
    throw InputError("--trials must be at least 1");
  const SearchSpace space = resolve_search_space(options.space);
  result.space_name = space.name;
  const auto optimizer = make_optimizer(options, space);

  auto evaluator = make_evaluator(options, space);
  result.evaluator = options.engine == "sim" ? "sim " + sim::resolve_sim_setup(options.sim).name
                                             : options.engine + " " + options.model;
  if (options.slots < 1)
    throw InputError("--slots must be at least 1");
  if (context.recording())
    context.archive->add_event(context.run_id, std::nullopt, "info", options_event,
                               result.resumed_from ? fmt::format("resumed from run {}", result.resumed_from)
                                                   : "study options",
                               to_json(options));
  StudyOptions study;
  study.enqueued = simulator_prior(options, space);
  if (!study.enqueued.empty() && context.recording())
    context.archive->add_event(context.run_id, std::nullopt, "info", "tune.prior",
                               fmt::format("{} configurations from a {}-trial simulated study on {} are measured first",
                                           study.enqueued.size(), options.prior_trials, options.prior),
                               study.enqueued);
  study.trials = options.trials;
  study.top_k = options.top_k;
  study.replicates = options.replicates;
  study.baseline = options.baseline;
  study.seed = options.seed;
  const bool archived = context.recording();
  const std::filesystem::path directory =
      archived ? context.archive->run_directory(context.run_id) : std::filesystem::temp_directory_path();
  std::unique_ptr<TrialExecutor> executor;
  if (options.executor == "local") {
    if (!options.gpus.empty() && options.gpus.size() % static_cast<std::size_t>(options.slots) != 0)
      throw InputError(fmt::format("--gpus lists {} devices, which {} --slots cannot share evenly", options.gpus.size(),
                                   options.slots));
    executor =
        make_local_executor(*evaluator, options.slots, archived ? directory : std::filesystem::path(), options.gpus);
  } else if (options.executor == "slurm") {
    SlurmOptions slurm;
    slurm.slots = options.slots;
    slurm.partition = options.partition;
    slurm.sbatch_args = options.sbatch_args;
    slurm.directory = directory / "slurm";
    slurm.worker_command = {context.executable.string()};
    slurm.worker_command.insert(slurm.worker_command.end(), context.global_args.begin(), context.global_args.end());
    slurm.payload = to_json(options);
    slurm.archive = archived ? context.archive->path().string() : "";
    slurm.run_id = context.run_id;
    executor = make_slurm_executor(std::move(slurm));
  } else {
    throw InputError("--executor '" + options.executor + "' is not local or slurm");
  }
  result.study = run_study(
      space, *optimizer, *evaluator, *executor, study, previous,
      [&](const StudyTrial& t) {
        archive_trial(context, t, result.resumed_from);
        if (on_trial)
          on_trial(t);
      },
      [] { return interrupt_requested(); });
  if (result.study.best)
    result.best_command = evaluator->launch_command(*result.study.best);
  if (!options.svg_dir.empty())
    write_plots(result, options.svg_dir);
  if (!options.emit.empty() && result.study.best)
    write_file_atomic(options.emit,
                      "#!/bin/sh\n# optkit tune: the winning configuration\n" + result.best_command + "\n");
  if (context.recording() && result.study.best) {
    context.archive->add_metric(context.run_id, std::nullopt, {"best_value", result.study.best_median, ""});
    if (result.study.baseline_median)
      context.archive->add_metric(context.run_id, std::nullopt, {"baseline_value", *result.study.baseline_median, ""});
  }
  return result;
}

std::vector<const StudyTrial*>
pareto_frontier(const StudyResult& study) {
  std::vector<const StudyTrial*> measured, frontier;
  for (const auto& t : study.trials)
    if (t.outcome.status == TrialStatus::measured && t.outcome.metrics.contains("throughput") &&
        t.outcome.metrics.contains("p99_s"))
      measured.push_back(&t);
  const auto figures = [](const StudyTrial* t) {
    return std::pair{t->outcome.metrics.at("throughput").get<double>(), t->outcome.metrics.at("p99_s").get<double>()};
  };
  for (const auto* t : measured) {
    const auto mine = figures(t); // (throughput, p99)
    const bool dominated = std::any_of(measured.begin(), measured.end(), [&](const StudyTrial* o) {
      const auto other = figures(o);
      return other.first >= mine.first && other.second <= mine.second &&
             (other.first > mine.first || other.second < mine.second);
    });
    const bool repeat =
        std::any_of(frontier.begin(), frontier.end(), [&](const StudyTrial* f) { return f->config == t->config; });
    if (!dominated && !repeat)
      frontier.push_back(t);
  }
  std::sort(frontier.begin(), frontier.end(),
            [&](const StudyTrial* a, const StudyTrial* b) { return figures(a).second < figures(b).second; });
  return frontier;
}

nlohmann::json
to_json(const TuneResult& r) {
  nlohmann::json trials = nlohmann::json::array();
  for (const auto& t : r.study.trials)
    trials.push_back({{"number", t.number},
                      {"phase", to_string(t.phase)},
                      {"config", t.config},
                      {"resumed", t.resumed},
                      {"outcome", to_json(t.outcome)}});
  nlohmann::json out = {{"space", r.space_name},
                        {"engine", r.evaluator},
                        {"optimizer", r.options.optimizer},
                        {"objective", r.options.objective},
                        {"seed", r.options.seed},
                        {"trials", trials},
                        {"stop_reason", r.study.stop_reason},
                        {"status", r.study.best ? "FEASIBLE" : "INFEASIBLE"}};
  if (r.study.best) {
    out["best"] = {{"config", *r.study.best},
                   {"median_value", r.study.best_median},
                   {"values", r.study.best_values},
                   {"launch", r.best_command}};
  }
  if (r.study.baseline_median)
    out["baseline_median_value"] = *r.study.baseline_median;
  if (const auto frontier = pareto_frontier(r.study); !frontier.empty()) {
    out["pareto_frontier"] = nlohmann::json::array();
    for (const auto* t : frontier)
      out["pareto_frontier"].push_back({{"number", t->number},
                                        {"config", t->config},
                                        {"throughput", t->outcome.metrics.at("throughput")},
                                        {"p99_s", t->outcome.metrics.at("p99_s")},
                                        {"feasible", t->outcome.feasible()}});
  }
  if (r.resumed_from)
    out["resumed_from"] = r.resumed_from;
  return out;
}

TuneResult
tune_result_from_json(const nlohmann::json& j, const std::string& source) {
  return read_json_fields(source, [&] {
    TuneResult r;
    r.space_name = j.at("space").get<std::string>();
    r.evaluator = j.at("engine").get<std::string>();
    r.options.optimizer = j.at("optimizer").get<std::string>();
    r.options.objective = j.at("objective").get<std::string>();
    r.options.seed = json_integer<std::uint64_t>(j.at("seed"));
    for (const auto& t : j.at("trials"))
      r.study.trials.push_back({.number = json_integer<int>(t.at("number")),
                                .phase = json_enum(t.at("phase"), kStudyPhases, "a study phase"),
                                .config = t.at("config"),
                                .outcome = outcome_from_json(t.at("outcome")),
                                .resumed = t.at("resumed").get<bool>()});
    r.study.stop_reason = j.at("stop_reason").get<std::string>();
    if (j.contains("best")) {
      const auto& best = j.at("best");
      r.study.best = best.at("config");
      r.study.best_median = best.at("median_value").get<double>();
      r.study.best_values = best.at("values").get<std::vector<double>>();
      r.best_command = best.at("launch").get<std::string>();
    }
    if (j.contains("baseline_median_value"))
      r.study.baseline_median = j.at("baseline_median_value").get<double>();
    r.resumed_from = j.contains("resumed_from") ? json_integer<std::int64_t>(j.at("resumed_from")) : 0;
    return r;
  });
}

Table
trials_table(const TuneResult& r) {
  Table table({"trial", "phase", "config", "status", "value", "p99 s", "goodput/s", "certified/s", "note"});
  for (const auto& t : r.study.trials) {
    std::vector<std::string> knobs;
    for (const auto& [k, v] : t.config.items())
      knobs.push_back(k + "=" + value_text(v));
    const auto metric = [&](const char* name) {
      return t.outcome.metrics.contains(name) ? t.outcome.metrics.at(name) : nlohmann::json(nullptr);
    };
    table.add_row({t.number, to_string(t.phase), join(knobs, " "), to_string(t.outcome.status),
                   std::isfinite(t.outcome.value) ? nlohmann::json(std::round(t.outcome.value * 1e4) / 1e4)
                                                  : nlohmann::json(nullptr),
                   metric("p99_s"), metric("goodput"), metric("certified_rate"),
                   t.resumed                 ? std::string("resumed")
                   : t.outcome.feasible()    ? std::string()
                   : t.outcome.error.empty() ? std::string("SLO missed")
                                             : t.outcome.error});
  }
  return table;
}

std::string
progress_line(const StudyTrial& t) {
  std::vector<std::string> knobs;
  for (const auto& [k, v] : t.config.items())
    knobs.push_back(k + "=" + value_text(v));
  std::string figures;
  if (t.outcome.metrics.contains("p99_s"))
    figures = fmt::format(" p99 {:.3f}s goodput {:.2f}/s", t.outcome.metrics["p99_s"].get<double>(),
                          t.outcome.metrics["goodput"].get<double>());
  else if (t.outcome.metrics.contains("certified_rate"))
    figures = fmt::format(" certified {:.2f} req/s", t.outcome.metrics["certified_rate"].get<double>());
  return fmt::format("tune: trial {} {}{} [{}] {} value {}{}{}", t.number, to_string(t.phase),
                     t.resumed ? " (resumed)" : "", join(knobs, " "), to_string(t.outcome.status),
                     std::isfinite(t.outcome.value) ? fmt::format("{:.4f}", t.outcome.value) : "-", figures,
                     t.outcome.feasible()      ? ""
                     : t.outcome.error.empty() ? " SLO missed"
                                               : " " + t.outcome.error);
}

std::string
summary_line(const TuneResult& r) {
  if (!r.study.best)
    return fmt::format("INFEASIBLE: no configuration of {} met the SLO in {} ({} on {})", r.space_name,
                       r.study.stop_reason, r.options.optimizer, r.evaluator);
  std::string versus;
  if (r.study.baseline_median && *r.study.baseline_median != 0)
    versus = fmt::format(", {:.2f}× the defaults' {:.4f}", r.study.best_median / *r.study.baseline_median,
                         *r.study.baseline_median);
  std::vector<std::string> knobs;
  for (const auto& [k, v] : r.study.best->items())
    knobs.push_back(k + "=" + value_text(v));
  return fmt::format("BEST: {} — median value {:.4f} over {} measurements{} ({} on {}, {})", join(knobs, " "),
                     r.study.best_median, r.study.best_values.size(), versus, r.options.optimizer, r.evaluator,
                     r.study.stop_reason);
}

} // namespace optkit::tune
