// optkit tune — search engine knobs for the best SLO-feasible configuration.
#include "app_context.hpp"
#include "number_checks.hpp"

#include "core/error.hpp"
#include "tune/sim_fit_run.hpp"
#include "tune/tune_run.hpp"

#include <fmt/format.h>

#include <cstdio>

namespace optkit::cmd {

namespace {

// "knob=value" pairs of a repeatable flag.
std::map<std::string, double>
knob_values(const std::vector<std::string>& pairs, const std::string& flag) {
  std::map<std::string, double> out;
  for (const auto& pair : pairs) {
    const auto eq = pair.find('=');
    char* end = nullptr;
    const double value = eq == std::string::npos ? 0 : std::strtod(pair.c_str() + eq + 1, &end);
    if (eq == std::string::npos || eq == 0 || end == pair.c_str() + eq + 1 || *end != '\0')
      throw InputError(fmt::format("{} '{}' must read knob=number", flag, pair));
    out[pair.substr(0, eq)] = value;
  }
  return out;
}

void
register_calibrate_sim(CLI::App& tune, CommandRegistry& commands) {
  CLI::App* cal = tune.add_subcommand(
      "calibrate-sim", "Fit the simulator's step costs to an archived bench run of a live engine; write a setup");
  struct Flags {
    tune::SimFitOptions options;
    std::string format;
  };
  auto flags = std::make_shared<Flags>();
  auto& o = flags->options;
  cal->add_option("run", o.run, "the bench run (an id or 'last')")->required();
  cal->add_option("--max-num-seqs", o.max_num_seqs, "the engine's max_num_seqs during that run")
      ->check(number_range(1, 1 << 20))
      ->capture_default_str();
  cal->add_option("--max-num-batched-tokens", o.max_num_batched_tokens, "the engine's token budget during that run")
      ->check(number_range(std::int64_t{1}, std::int64_t{1} << 30))
      ->capture_default_str();
  cal->add_option("--slo-seconds", o.slo_s, "the setup's p99 target")->check(positive_number())->capture_default_str();
  cal->add_option("--name", o.name, "the setup's name (default: calibrated-run-N)");
  add_output_option(*cal, o.output, "write the fitted simulator setup (YAML) to FILE");
  add_format_option(*cal, flags->format);
  commands.add({"tune calibrate-sim", cal, [flags](AppContext& ctx) {
                  const auto result = tune::fit_simulator(flags->options, ctx.run_context(0));
                  const auto& t = result.fit.timing;
                  ctx.emit_result(
                      flags->format,
                      {.json = tune::to_json(result),
                       .table = tune::sim_fit_table(result),
                       .after = fmt::format(
                           "\nfitted to bench run {}: step_base {:.3f} ms, prefill {:.3f} us/token, decode "
                           "{:.3f} us/sequence; RMS log error {:.3f} ({} simulations){}\n",
                           result.bench_run, t.step_base_s * 1e3, t.prefill_token_s * 1e6, t.decode_seq_s * 1e6,
                           result.fit.rms_log_error, result.fit.evaluations,
                           flags->options.output.empty() ? "" : "; setup written to " + flags->options.output)});
                }});
}

struct TuneFlags {
  tune::TuneOptions options;
  std::vector<std::string> hw_cost, steps;
  std::string start, format, output, worker;
  double slo_seconds = 0;
};

// What trials run on: the simulator, or a live engine and bench's settings for it.
void
add_live_engine_options(CLI::App& tune, TuneFlags& flags) {
  tune.add_option("--engine", flags.options.engine,
                  "what trials run on: sim (the discrete-event simulator), or a live engine launched per trial: "
                  "optkit (serve-deltas), vllm, sglang, trtllm, llamacpp (llama-server)")
      ->check(CLI::IsMember({"sim", "optkit", "vllm", "sglang", "trtllm", "llamacpp"}))
      ->capture_default_str();
  tune.add_option("--model", flags.options.model, "live engines: the model they serve (a folder or a Hugging Face id)");
  tune.add_option("--engine-executable", flags.options.engine_executable,
                  "live engines: the executable (default: on PATH; optkit: this binary)");
  tune.add_option("--engine-arg", flags.options.engine_args,
                  "live engines: an argument appended to every launch (repeatable)")
      ->allow_extra_args(false);
  tune.add_option("--engine-timeout", flags.options.engine_timeout_s, "live engines: seconds to answer /health")
      ->check(positive_number())
      ->capture_default_str();
  tune.add_option("--profile", flags.options.profile, "live engines: bench's serving profile for every trial")
      ->capture_default_str();
  tune.add_option("--tokenizer", flags.options.tokenizer,
                  "live engines: model folder whose tokenizer counts prompt tokens");
  tune.add_option("--bench-min-trial-seconds", flags.options.bench_min_trial_s,
                  "live, certified: the shortest open-loop bench trial")
      ->check(non_negative_number())
      ->capture_default_str();
  tune.add_option("--bench-max-trials", flags.options.bench_max_trials,
                  "live, certified: open-loop bench trials per certification")
      ->check(number_range(1, 1000))
      ->capture_default_str();
  tune.add_option("--beta-tolerance", flags.options.beta_tolerance,
                  "live, certified: bench's steady-state tolerance (Eq. 1)")
      ->check(number_range(0.0, 1.0))
      ->capture_default_str();
  tune.add_option("--max-dispatch-lag-ms", flags.options.max_dispatch_lag_ms,
                  "live: bench's p99 dispatch-lag bound before a trial is client-limited")
      ->check(positive_number())
      ->capture_default_str();
  tune.add_option("--goodput-requests", flags.options.goodput_requests,
                  "live, goodput: requests in each closed-loop segment")
      ->check(number_range(10, 1 << 24))
      ->capture_default_str();
}

// The search: space, optimizer, objective, its SLOs and each optimizer's knobs, the re-measurement.
void
add_search_options(CLI::App& tune, TuneFlags& flags) {
  tune.add_option("--space", flags.options.space, "search space: a name under profiles/spaces/ or a YAML file");
  tune.add_option("--optimizer", flags.options.optimizer, "tpe | hillclimb | random | grid")
      ->check(CLI::IsMember({"tpe", "hillclimb", "random", "grid"}))
      ->capture_default_str();
  tune.add_option("--trials", flags.options.trials, "search trials (the baseline included)")
      ->check(number_range(1, 100000))
      ->capture_default_str();
  tune.add_option("--objective", flags.options.objective,
                  "goodput (SLO-Tuner Eq. 3) | certified (OptiKit Eq. 2: certified rate per GPU)")
      ->check(CLI::IsMember({"goodput", "certified"}))
      ->capture_default_str();
  tune.add_option("--slo", flags.options.slos,
                  "certified objective: an SLO in bench's syntax, e.g. 'e2e:p99<=1.2s' (repeatable)");
  tune.add_option("--slo-seconds", flags.slo_seconds,
                  "goodput objective: the p99 end-to-end target (default: the simulator setup's slo_s)")
      ->check(positive_number());
  tune.add_option("--lambda", flags.options.lambda, "Eq. 3: weight of the p99 overshoot")->capture_default_str();
  tune.add_option("--hw-cost", flags.hw_cost,
                  "Eq. 2 of SLO-Tuner: knob=weight of the hardware-cost term (repeatable; default concurrency=0.01 "
                  "max_num_seqs=0.01 speculative_tokens=0.02)");
  tune.add_option("--sim", flags.options.sim, "simulator setup: a name under profiles/sim/ or a YAML file")
      ->capture_default_str();
  tune.add_option("--prior", flags.options.prior,
                  "warm-start: run a simulated TPE study on this simulator setup first and measure its best "
                  "configurations first (tpe, random)");
  tune.add_option("--prior-trials", flags.options.prior_trials, "--prior: simulated trials")
      ->check(number_range(1, 1000000))
      ->capture_default_str();
  tune.add_option("--prior-top", flags.options.prior_top, "--prior: configurations taken from it")
      ->check(number_range(1, 1000))
      ->capture_default_str();
  tune.add_option("--tpe-startup", flags.options.tpe.startup_trials,
                  "TPE: random trials before the model (n_startup_trials)")
      ->check(number_range(0, 100000))
      ->capture_default_str();
  tune.add_option("--tpe-candidates", flags.options.tpe.ei_candidates,
                  "TPE: candidates scored per parameter (n_ei_candidates)")
      ->check(number_range(1, 100000))
      ->capture_default_str();
  tune.add_option("--start", flags.start, "hill-climb: the starting configuration as JSON (default: the defaults)");
  tune.add_option("--delta", flags.options.hillclimb.delta, "hill-climb: the smallest score gain that moves (δ)")
      ->check(non_negative_number())
      ->capture_default_str();
  tune.add_option("--step", flags.steps, "hill-climb: knob=step of a neighbour move (repeatable)");
  tune.add_option("--grid-points", flags.options.grid_points, "grid: points per continuous float parameter")
      ->check(number_range(2, 1000))
      ->capture_default_str();
  tune.add_option("--top-k", flags.options.top_k, "configurations re-measured at the end")
      ->check(number_range(0, 1000))
      ->capture_default_str();
  tune.add_option("--replicates", flags.options.replicates, "re-measurements of each of them")
      ->check(number_range(0, 100))
      ->capture_default_str();
  tune.add_flag("!--no-baseline", flags.options.baseline, "do not measure the space's defaults as trial 0");
  add_seed_option(tune, flags.options.seed, "seed of the optimizer and of every trial's workload");
}

// Where trials run, resuming, and where results go.
void
add_executor_options(CLI::App& tune, TuneFlags& flags) {
  tune.add_option("--executor", flags.options.executor, "where trials run: local, or slurm (every trial an sbatch job)")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->capture_default_str();
  tune.add_option("--slots", flags.options.slots, "trials at once (local: threads/engines; slurm: jobs in the queue)")
      ->check(number_range(1, 4096))
      ->capture_default_str();
  tune.add_option("--gpus", flags.options.gpus,
                  "local: GPU ids shared out among the slots, each engine launched with its slot's "
                  "CUDA_VISIBLE_DEVICES, e.g. --gpus 0,1,2,3 --slots 2")
      ->delimiter(',');
  tune.add_option("--partition", flags.options.partition,
                  "slurm: the partition trials are submitted to (default: the cluster's)");
  tune.add_option("--sbatch-arg", flags.options.sbatch_args,
                  "slurm: an argument for every sbatch, e.g. --sbatch-arg=--gres=gpu:1 (repeatable)")
      ->allow_extra_args(false);
  tune.add_option("--worker", flags.worker, "internal: run one trial as a Slurm job")->group("");
  tune.add_option("--resume", flags.options.resume,
                  "continue an interrupted study (a run id or 'last'); its options are reused");
  tune.add_option("--svg", flags.options.svg_dir, "write trajectory.svg (and pareto.svg for goodput) into DIR");
  tune.add_option("--emit", flags.options.emit, "write the winner's launch command to FILE");
  add_format_option(tune, flags.format);
  add_output_option(tune, flags.output, "write the result to FILE instead of stdout");
}

// The library's options from the flags.
tune::TuneOptions
tune_options(const TuneFlags& flags) {
  auto options = flags.options;
  if (options.resume.empty() && options.space.empty())
    throw InputError("--space is required (a name under profiles/spaces/ or a YAML file)");
  if (!flags.hw_cost.empty())
    options.hw_cost = knob_values(flags.hw_cost, "--hw-cost");
  options.hillclimb.steps = knob_values(flags.steps, "--step");
  if (flags.slo_seconds > 0)
    options.slo_s = flags.slo_seconds;
  if (!flags.start.empty()) {
    try {
      options.hillclimb.start = nlohmann::json::parse(flags.start);
    } catch (const nlohmann::json::exception&) {
      throw InputError("--start '" + flags.start + "' is not a JSON object of knob values");
    }
  }
  return options;
}

void
run_tune_command(const TuneFlags& flags, AppContext& ctx) {
  const auto options = tune_options(flags);
  const bool progress = !ctx.flags.quiet;
  const auto result = tune::run_tune(options, ctx.run_context(0), [&](const tune::StudyTrial& t) {
    if (progress)
      std::fprintf(stderr, "%s\n", tune::progress_line(t).c_str());
  });
  ctx.emit_result(flags.format,
                  {.json = tune::to_json(result),
                   .table = tune::trials_table(result),
                   .after = "\n" + tune::summary_line(result) + "\n" +
                            (result.best_command.empty() ? "" : "launch: " + result.best_command + "\n")},
                  flags.output);
  if (result.study.interrupted)
    throw Interrupted("tune interrupted; continue with --resume " + std::to_string(ctx.run_id));
  if (!result.study.best)
    throw GoalNotMet(tune::summary_line(result));
}

} // namespace

void
register_tune(CLI::App& app, CommandRegistry& commands) {
  CLI::App* tune = app.add_subcommand(
      "tune", "Search engine knobs for the best SLO-feasible configuration (TPE, hill-climb, random, grid)");
  tune->require_subcommand(0, 1);
  register_calibrate_sim(*tune, commands);
  auto flags = std::make_shared<TuneFlags>();
  add_live_engine_options(*tune, *flags);
  add_search_options(*tune, *flags);
  add_executor_options(*tune, *flags);
  commands.add({"tune", tune,
                [flags](AppContext& ctx) {
                  if (!flags->worker.empty())
                    tune::tune_worker(flags->worker);
                  else
                    run_tune_command(*flags, ctx);
                },
                true, &flags->worker});
}

} // namespace optkit::cmd
