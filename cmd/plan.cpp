// optkit plan — predict the best serving configuration without a GPU (AIConfigurator's method):
// search parallelism × batch × serving mode against a perf database with a speed-of-light
// fallback, print the Pareto frontier, the best configuration under the SLA and its launch command.
#include "app_context.hpp"

#include "bench/serving_profile.hpp"

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/resource_paths.hpp"
#include "hetero/hetero_run.hpp"
#include "hetero/stage_svg.hpp"
#include "plan/efficiency_fit.hpp"
#include "plan/estimate_run.hpp"
#include "plan/plan_run.hpp"
#include "plan/profile_run.hpp"
#include "proc/worker_spec.hpp"

#include <cmath>
#include <fmt/format.h>

namespace optkit::cmd {

namespace {

void
register_plan_profile(CLI::App& plan_app, CommandRegistry& commands) {
  struct Flags {
    plan::ProfileOptions options;
    double timeout_s = 0;
    std::string format, worker;
  };
  auto flags = std::make_shared<Flags>();
  plan::ProfileOptions& o = flags->options;
  CLI::App* profile = plan_app.add_subcommand(
      "profile", "Measure the perf database of this GPU (GEMMs, attention, memory) for later plans");
  profile->add_option("--system", o.system, "the system these GPUs are (profiles/systems/<name>.yaml)");
  profile->add_option("--model", o.models,
                      "measure this model's shapes (preset or config.json; repeatable; "
                      "default: every preset)");
  // --out is the spelling before -o/--output was shared by every command; still accepted.
  add_output_option(*profile, o.out, "database folder (default: profiles/perf/<system>)", "--out");
  profile->add_flag("--replace", o.replace, "measure again over an existing database folder");
  profile->add_flag("--quick", o.quick, "a few points per shape (minutes, for a first look)");
  profile->add_flag("--dry-run", o.dry_run, "list what would be measured; needs no GPU");
  profile->add_option("--gpu", o.gpu, "which GPU to measure on")->capture_default_str();
  add_timeout_option(*profile, flags->timeout_s);
  add_format_option(*profile, flags->format);
  profile->add_option("--worker", flags->worker, "internal: run as a worker child")->group("");
  commands.add({"plan profile", profile,
                [flags](AppContext& ctx) {
                  if (!flags->worker.empty()) {
                    plan::profile_worker(proc::read_worker_spec(flags->worker));
                    return;
                  }
                  if (flags->options.system.empty())
                    throw InputError("--system NAME is required (optkit plan --help lists the systems)");
                  const auto run = plan::run_profile(flags->options, ctx.run_context(flags->timeout_s));
                  ctx.emit_result(flags->format, {.json = plan::to_json(run), .table = plan::profile_table(run)});
                },
                true, &flags->worker});
}

void
register_plan_calibrate(CLI::App& plan_app, CommandRegistry& commands) {
  struct Flags {
    std::string points, format;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* calibrate = plan_app.add_subcommand(
      "calibrate", "Fit the speed-of-light fallback's efficiencies to published measurements; errors before and after");
  calibrate->add_option("--points", flags->points,
                        "published points YAML (default: profiles/calibration/published.yaml)");
  add_format_option(*calibrate, flags->format);
  commands.add({"plan calibrate", calibrate, [flags](AppContext& ctx) {
                  const auto run = plan::run_efficiency_fit(flags->points, ctx.run_context(0));
                  ctx.emit_result(flags->format, {.json = plan::to_json(run),
                                                  .table = plan::efficiency_fit_table(run),
                                                  .after = plan::efficiency_fit_summary(run)});
                }});
}

void
register_plan_hetero(CLI::App& plan_app, CommandRegistry& commands) {
  struct Flags {
    hetero::HeteroRunOptions options;
    std::string bits = "3,4,8,16", format, output, svg, profile;
  };
  auto flags = std::make_shared<Flags>();
  hetero::HeteroRunOptions& o = flags->options;
  CLI::App* hetero_app = plan_app.add_subcommand(
      "hetero",
      "Plan one model over mixed GPU types with per-layer bitwidths (SplitQuant): stages, bits, micro-batches");
  hetero_app->add_option("--cluster", o.cluster, "YAML of device groups (GPU type, count, node) and links");
  hetero_app->add_option("--model", o.model, "preset name or a Hugging Face config.json / folder");
  hetero_app->add_option("--isl", o.workload.isl, "prompt tokens per request")->capture_default_str();
  hetero_app->add_option("--osl", o.workload.osl, "generated tokens per request")->capture_default_str();
  hetero_app->add_option("--batch", o.workload.batch, "global batch (concurrent requests)")->capture_default_str();
  hetero_app->add_option("--profile", flags->profile,
                         "serving profile (profiles/serving NAME or FILE): ISL and OSL become a padded batch's "
                         "(the mean longest prompt and output of --batch requests drawn from it)");
  hetero_app->add_option("--bits", flags->bits, "bitwidths a layer may take, comma-separated: 3, 4, 8, 16")
      ->capture_default_str();
  hetero_app
      ->add_option("--theta", o.planner.theta,
                   "seconds of batch latency worth the quality lost with every layer at the lowest bitwidth")
      ->capture_default_str();
  hetero_app->add_option("--group-size", o.planner.group_size, "adjacent layers decided together (0: automatic)")
      ->capture_default_str();
  hetero_app->add_option("--time-limit", o.planner.time_limit_s, "seconds the ILP solver may take in all")
      ->capture_default_str();
  hetero_app->add_option("--solver", o.solver, "ilp (CBC, started from the heuristic) or heuristic (bitwidth transfer)")
      ->capture_default_str();
  hetero_app->add_option("--decode-micro-batch", o.planner.decode_micro_batch,
                         "sequences per decode micro-batch (0: batch / GPUs)");
  hetero_app->add_option("--calib", o.calib,
                         "calibration text or JSONL: the indicator from the folder's weights and these activations");
  hetero_app->add_option("--calib-samples", o.calib_samples, "calibration documents used")->capture_default_str();
  hetero_app->add_option("--calib-length", o.calib_length, "tokens per calibration document at most")
      ->capture_default_str();
  hetero_app->add_option("--indicator", o.indicator, "variance (SplitQuant's) or hessian (needs --calib)")
      ->capture_default_str();
  hetero_app->add_option("--threads", o.threads, "threads for the calibration pass (0: all)")->capture_default_str();
  add_output_option(*hetero_app, flags->output, "also write the JSON plan to FILE");
  hetero_app->add_option("--svg", flags->svg, "also draw the plan to FILE (SVG: memory and time per stage)");
  add_format_option(*hetero_app, flags->format);
  commands.add(
      {"plan hetero", hetero_app, [flags, hetero_app](AppContext& ctx) {
         hetero::HeteroRunOptions options = flags->options;
         options.planner.bits = hetero::parse_bit_list(flags->bits, "--bits");
         if (!flags->profile.empty()) {
           if (hetero_app->count("--isl") > 0 || hetero_app->count("--osl") > 0)
             throw InputError("--profile gives ISL and OSL: drop --isl/--osl, or drop --profile");
           const auto padded =
               bench::padded_batch_lengths(bench::resolve_serving_profile(flags->profile), options.workload.batch, 0);
           options.workload.isl = static_cast<int>(std::lround(padded.input_tokens));
           options.workload.osl = static_cast<int>(std::lround(padded.output_tokens));
           options.workload_profile = flags->profile;
         }
         const auto run = hetero::run_hetero(options, ctx.run_context(0));
         auto plan_json = hetero::to_json(run);
         if (!flags->output.empty())
           write_file_atomic(flags->output, plan_json.dump(2) + "\n");
         if (!flags->svg.empty())
           write_file_atomic(flags->svg, hetero::stage_svg(run));
         ctx.emit_result(flags->format, {.json = std::move(plan_json),
                                         .table = hetero::stage_table(run),
                                         .after = "\n" + hetero::baseline_table(run).render_text(ctx.color_stdout())});
       }});
}

// The flags that describe what to plan for (model, system, workload, precision, engine, SLA,
// speculation, perf database), shared by `plan` and `plan estimate`.
struct PlanRequestFlags {
  plan::PlanOptions options;
  double ttft = 0, tpot = 0, speed = 0, e2e = 0, memory_fraction = 0;
  std::string engine = "vllm";
};

void
add_plan_request_options(CLI::App& app, PlanRequestFlags& flags) {
  plan::PlanOptions& o = flags.options;
  app.add_option("--model", o.model, "preset name (see --list-models) or a Hugging Face config.json / folder");
  app.add_option("--system", o.system, "GPU system: a profiles/systems/<name>.yaml (see --list-systems)");
  app.add_option("--gpus", o.gpus, "GPUs to deploy on")->capture_default_str();
  app.add_option("--isl", o.isl, "input (prompt) tokens per request")->capture_default_str();
  app.add_option("--osl", o.osl, "output tokens per request")->capture_default_str();
  app.add_option("--prefix", o.prefix, "prompt tokens served from the prefix cache")->capture_default_str();
  app.add_option("--ttft", flags.ttft, "SLA: largest time to first token, ms (default 2000)");
  app.add_option("--tpot", flags.tpot, "SLA: largest time per output token, ms (default 30)");
  app.add_option("--speed", flags.speed, "SLA: least tokens/s per user (instead of --tpot)");
  app.add_option("--e2e", flags.e2e,
                 "SLA: largest request latency (TTFT + (OSL-1)·TPOT), ms; bounds TPOT unless --tpot is given");
  app.add_option("--engine", flags.engine,
                 "serving engine whose memory rules apply: vllm, sglang, trtllm, llamacpp (default vllm; for "
                 "plan, the --emit engine when given)");
  app.add_option("--weight-dtype", o.weight_dtype, "weights: bf16, fp16, fp8, int8, int4")->capture_default_str();
  app.add_option("--act-dtype", o.activation_dtype,
                 "activations: bf16, fp16, fp8, int8 (default: fp8/int8 with such weights, else bf16)");
  app.add_option("--kv-dtype", o.kv_dtype,
                 "KV cache: bf16, fp16, fp8, int8, or auto: the engine's default (TensorRT-LLM: fp8 with "
                 "fp8 weights; otherwise the weights' 16-bit dtype)")
      ->capture_default_str();
  app.add_option("--memory-fraction", flags.memory_fraction,
                 "engine memory fraction (vLLM gpu-memory-utilization, SGLang mem-fraction-static, "
                 "TensorRT-LLM kv_cache_free_gpu_memory_fraction; default 0.9)");
  app.add_option("--spec-tokens", o.spec_tokens, "speculative decoding: draft tokens per step (0: off)")
      ->capture_default_str();
  app.add_option("--spec-acceptance", o.spec_acceptance, "speculative decoding: per-token acceptance rate")
      ->capture_default_str();
  app.add_option("--spec-draft-cost", o.spec_draft_cost, "speculative decoding: a draft token's cost / a decode step")
      ->capture_default_str();
  app.add_option("--moe-alpha", o.moe_alpha, "MoE routing skew: power-law alpha (0: balanced)")->capture_default_str();
  app.add_option("--perf-db", o.perf_db, "perf database folder (default: profiles/perf/<system>)");
}

// The options as given: the SLA terms, memory fraction and engine only where a flag was given.
plan::PlanOptions
plan_request_options(const CLI::App& app, const PlanRequestFlags& flags) {
  plan::PlanOptions options = flags.options;
  if (options.model.empty() || options.system.empty())
    throw InputError(options.model.empty() ? "--model NAME|DIR is required (presets: optkit plan --help)"
                                           : "--system NAME is required");
  const auto given = [&](const char* name) { return app.count(name) > 0; };
  if (given("--ttft"))
    options.ttft_ms = flags.ttft;
  if (given("--tpot"))
    options.tpot_ms = flags.tpot;
  if (given("--speed"))
    options.speed = flags.speed;
  if (given("--e2e"))
    options.e2e_ms = flags.e2e;
  if (given("--memory-fraction"))
    options.memory_fraction = flags.memory_fraction;
  if (given("--engine"))
    options.engine = flags.engine;
  return options;
}

void
register_plan_estimate(CLI::App& plan_app, CommandRegistry& commands) {
  struct Flags {
    PlanRequestFlags request;
    plan::EstimateOptions estimate;
    std::string format;
  };
  auto flags = std::make_shared<Flags>();
  plan::EstimateOptions& e = flags->estimate;
  CLI::App* estimate = plan_app.add_subcommand(
      "estimate", "Price one given configuration as plan does: TTFT, TPOT, throughput, memory, and each step's parts");
  add_plan_request_options(*estimate, flags->request);
  estimate->add_option("--mode", e.mode, "serving mode: static, agg or disagg")->capture_default_str();
  estimate->add_option("--tp", e.parallel.tp, "tensor parallel degree (disagg: of the decode worker)")
      ->capture_default_str();
  estimate->add_option("--pp", e.parallel.pp, "pipeline stages (disagg: of the decode worker)")->capture_default_str();
  estimate->add_option("--dp", e.parallel.dp, "attention data parallel degree (MoE)")->capture_default_str();
  estimate->add_option("--ep", e.parallel.ep, "expert parallel degree (MoE)")->capture_default_str();
  estimate->add_option("--batch", e.batch, "sequences in flight per worker (disagg: the decode batch)")
      ->capture_default_str();
  estimate->add_option("--ctx-tokens", e.ctx_tokens, "agg: prompt tokens per mixed step (0: one whole prompt)")
      ->capture_default_str();
  estimate->add_option("--prefill-tp", e.prefill_parallel.tp, "disagg: the prefill worker's tensor parallel degree")
      ->capture_default_str();
  estimate->add_option("--prefill-pp", e.prefill_parallel.pp, "disagg: the prefill worker's pipeline stages")
      ->capture_default_str();
  estimate->add_option("--prefill-dp", e.prefill_parallel.dp, "disagg: the prefill worker's attention DP (MoE)")
      ->capture_default_str();
  estimate->add_option("--prefill-ep", e.prefill_parallel.ep, "disagg: the prefill worker's expert parallel degree")
      ->capture_default_str();
  estimate->add_option("--prefill-batch", e.prefill_batch, "disagg: prompts a prefill worker prefills together")
      ->capture_default_str();
  estimate->add_option("--prefill-workers", e.workers.prefill,
                       "disagg: prefill workers in one unit (with --decode-workers; default: rate-matched)");
  estimate->add_option("--decode-workers", e.workers.decode,
                       "disagg: decode workers in one unit (with --prefill-workers; default: rate-matched)");
  add_format_option(*estimate, flags->format);
  commands.add({"plan estimate", estimate, [flags, estimate](AppContext& ctx) {
                  plan::EstimateOptions options = flags->estimate;
                  options.plan = plan_request_options(*estimate, flags->request);
                  const auto run = plan::run_estimate(options, ctx.run_context(0));
                  ctx.emit_result(flags->format, {.json = plan::to_json(run),
                                                  .table = plan::estimate_table(run),
                                                  .before = plan::estimate_summary(run)});
                }});
}

} // namespace

void
register_plan(CLI::App& app, CommandRegistry& commands) {
  struct Flags {
    PlanRequestFlags request;
    double target_rate = 0;
    std::string format;
    bool list_models = false, list_systems = false;
  };
  auto flags = std::make_shared<Flags>();
  plan::PlanOptions& o = flags->request.options;
  CLI::App* plan_app = app.add_subcommand(
      "plan", "Predict the best serving configuration (parallelism, batch, aggregated or disaggregated) without a GPU");
  plan_app->require_subcommand(0, 1);
  add_plan_request_options(*plan_app, flags->request);
  plan_app->add_option("--mode", o.modes, "serving modes to search, comma-separated: static, agg, disagg")
      ->capture_default_str();
  plan_app->add_option("--target-rate", flags->target_rate, "find the fewest GPUs sustaining this many requests/s");
  plan_app->add_option("--slo", o.slos,
                       "percentile SLA, bench's syntax (e.g. 'e2e:p95<=500ms'; repeatable): the rows meeting the mean "
                       "bounds are simulated under Poisson arrivals");
  plan_app->add_option("--rate", o.rate, "with --slo: check the SLOs at this many requests/s over the deployment");
  plan_app->add_option("--slo-requests", o.slo_requests, "with --slo: simulated requests per evaluation")
      ->capture_default_str();
  plan_app->add_option("--emit", o.emit,
                       "print the launch script of the chosen configuration: vllm, sglang, trtllm, llamacpp");
  plan_app->add_option("--plot", o.plot, "write the Pareto frontier as SVG to FILE");
  plan_app->add_option("--bench-profile", o.bench_profile, "write an optkit bench serving profile (YAML) to FILE");
  add_format_option(*plan_app, flags->format);
  plan_app->add_flag("--list-models", flags->list_models, "list the built-in model presets and exit");
  plan_app->add_flag("--list-systems", flags->list_systems, "list the bundled GPU systems and exit");
  commands.add({"plan", plan_app, [flags, plan_app](AppContext& ctx) {
                  if (flags->list_models || flags->list_systems) {
                    ctx.emit(flags->list_models ? plan::model_listing() : plan::system_listing());
                    return;
                  }
                  plan::PlanOptions options = plan_request_options(*plan_app, flags->request);
                  if (plan_app->count("--target-rate") > 0)
                    options.target_rate = flags->target_rate;
                  const auto run = plan::run_plan(options, ctx.run_context(0));
                  if (!options.emit.empty()) {
                    ctx.emit(plan::emit_launch(run, options.emit));
                    return;
                  }
                  ctx.emit_result(flags->format, {.json = plan::to_json(run),
                                                  .table = plan::pareto_table(run),
                                                  .before = plan::plan_summary(run),
                                                  .after = run.tails.empty() ? std::string()
                                                                             : "\n" + plan::tail_table(run).render_text(
                                                                                          ctx.color_stdout())});
                }});
  register_plan_profile(*plan_app, commands);
  register_plan_hetero(*plan_app, commands);
  register_plan_calibrate(*plan_app, commands);
  register_plan_estimate(*plan_app, commands);
}

} // namespace optkit::cmd
