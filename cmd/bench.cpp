// optkit bench — certify the highest request rate an OpenAI-compatible server sustains under SLOs.
#include "app_context.hpp"
#include "number_checks.hpp"

#include "bench/bench_report.hpp"
#include "bench/bench_run.hpp"
#include "bench/generator_ceiling.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

namespace optkit::cmd {

namespace {

struct BenchFlags {
  bench::BenchOptions options;
  std::string format, output;
  double rate = 0, max_dispatch_lag_ms = 5;
  int concurrency = 0;
  bool calibrate = false;
};

// The server under test: an endpoint, or an engine bench launches.
void
add_target_options(CLI::App& bench, BenchFlags& flags) {
  bench.add_option("--endpoint", flags.options.endpoint, "OpenAI-compatible server, e.g. http://127.0.0.1:8000");
  bench
      .add_option("--engine", flags.options.engine,
                  "launch this engine for the run instead: vllm|sglang|trtllm|llamacpp|optkit")
      ->check(CLI::IsMember({"vllm", "sglang", "trtllm", "llamacpp", "optkit"}));
  bench
      .add_option("--engine-arg", flags.options.engine_args,
                  "an argument appended to the engine's command line (repeatable)")
      ->allow_extra_args(false);
  bench.add_option("--engine-executable", flags.options.engine_executable,
                   "the engine's executable (default: on PATH; optkit: this binary)");
  bench.add_option("--engine-timeout", flags.options.engine_timeout_s, "seconds the engine may take to answer /health")
      ->check(positive_number())
      ->capture_default_str();
  bench.add_flag("--calibrate", flags.calibrate,
                 "measure the load generator's own ceiling against a loopback no-op endpoint, then exit");
  bench.add_option("--model", flags.options.model,
                   "model name to request (default: the first /v1/models lists); with --engine, what it serves");
  bench.add_option("--api-key", flags.options.api_key, "bearer key for the server (default: $OPENAI_API_KEY)");
}

// What is sent: the profile, prompts, SLOs, one trial's rate or streams, or a trace.
void
add_workload_options(CLI::App& bench, BenchFlags& flags) {
  bench
      .add_option("--profile", flags.options.profile, "serving profile: a name under profiles/serving/ or a YAML file")
      ->capture_default_str();
  bench.add_option("--tokenizer", flags.options.tokenizer,
                   "model folder whose tokenizer.json counts prompt tokens (default: the server's /tokenize)");
  bench.add_option("--corpus", flags.options.corpus,
                   "UTF-8 text prompts are cut from (default: profiles/serving/corpus.txt)");
  bench.add_option("--slo", flags.options.slos, "SLO, e.g. 'ttft:p95<=500ms', 'e2e:p99<2s+5%' (repeatable)");
  bench.add_option("--rate", flags.rate, "run one open-loop trial at this many requests/s instead of certifying")
      ->check(positive_number());
  bench.add_option("--concurrency", flags.concurrency, "run one closed-loop trial with this many streams instead")
      ->check(number_range(1, 1 << 20));
  bench.add_option("--trace", flags.options.trace,
                   "replay a request trace instead: JSON lines (timestamp s, input_tokens, output_tokens), "
                   "Mooncake's JSON lines (timestamp ms, input_length, output_length, hash_ids) or an Azure "
                   "LLM inference trace CSV (TIMESTAMP, ContextTokens, GeneratedTokens)");
  bench.add_option("--trace-format", flags.options.trace_format, "the trace's format (auto: found from its content)")
      ->check(CLI::IsMember({"auto", "jsonl", "mooncake", "azure"}))
      ->capture_default_str();
  bench
      .add_option("--trace-block-tokens", flags.options.trace_block_tokens,
                  "tokens per block id of a Mooncake trace's hash_ids (Mooncake's 512)")
      ->check(number_range(1, 1 << 20))
      ->capture_default_str();
  bench.add_option("--time-scale", flags.options.time_scale, "trace replay speed (2: twice as fast)")
      ->check(positive_number())
      ->capture_default_str();
  bench.add_option("--requests", flags.options.requests,
                   "requests in a --rate/--concurrency trial (default: sized as a trial)");
}

// How the highest rate is certified: trials, steadiness, windows, replicates.
void
add_certification_options(CLI::App& bench, BenchFlags& flags) {
  bench
      .add_option("--initial-rate", flags.options.certify.initial_rate,
                  "first open-loop rate (default: the gate's lower bound LB)")
      ->check(non_negative_number());
  bench.add_option("--max-trials", flags.options.certify.max_trials, "open-loop trial budget")
      ->check(number_range(1, 1000))
      ->capture_default_str();
  bench
      .add_option("--precision", flags.options.certify.precision,
                  "stop when failing − passing rate ≤ this fraction of the passing rate")
      ->check(number_range(0.001, 1.0))
      ->capture_default_str();
  bench
      .add_option("--beta-tolerance", flags.options.certify.summary.beta_tolerance,
                  "steady state iff |β − 1| ≤ this (Eq. 1)")
      ->check(number_range(0.0, 1.0))
      ->capture_default_str();
  bench
      .add_option("--max-error-rate", flags.options.certify.summary.max_error_rate,
                  "a trial with more failed requests fails")
      ->check(number_range(0.0, 1.0))
      ->capture_default_str();
  bench
      .add_option("--max-dispatch-lag-ms", flags.max_dispatch_lag_ms,
                  "p99 dispatch lag beyond which a trial is client-limited")
      ->check(positive_number())
      ->capture_default_str();
  bench.add_option("--gate-requests", flags.options.certify.gate_requests, "requests in the closed-loop gate")
      ->check(number_range(2, 1 << 20))
      ->capture_default_str();
  bench.add_option("--min-requests", flags.options.certify.min_requests, "fewest requests in an open-loop trial")
      ->check(number_range(8, 1 << 24))
      ->capture_default_str();
  bench.add_option("--min-trial-seconds", flags.options.certify.min_trial_s, "shortest open-loop trial")
      ->check(non_negative_number())
      ->capture_default_str();
  bench.add_option("--max-trial-seconds", flags.options.certify.max_trial_s, "longest open-loop trial (0: no limit)")
      ->check(non_negative_number())
      ->capture_default_str();
  bench
      .add_option("--warmup", flags.options.certify.summary.warmup_fraction,
                  "share of each trial's schedule excluded at the start")
      ->check(number_range(0.0, 0.45))
      ->capture_default_str();
  bench.add_option("--cooldown", flags.options.certify.summary.cooldown_fraction, "share excluded at the end")
      ->check(number_range(0.0, 0.45))
      ->capture_default_str();
  bench
      .add_option("--replicates", flags.options.certify.replicates,
                  "runs of the boundary rate; a certificate needs all to pass")
      ->check(number_range(1, 20))
      ->capture_default_str();
  bench
      .add_option("--settle-timeout", flags.options.certify.settle_timeout_s,
                  "seconds to wait before each open-loop trial for the server to drain the trials before it")
      ->check(non_negative_number())
      ->capture_default_str();
  add_seed_option(bench, flags.options.certify.seed, "seed of request lengths, prompts and arrivals");
}

// Requests' limits and where results go.
void
add_output_options(CLI::App& bench, BenchFlags& flags) {
  bench
      .add_option("--request-timeout", flags.options.request_timeout_s, "seconds one request may take before it fails")
      ->check(positive_number())
      ->capture_default_str();
  bench.add_option("--max-connections", flags.options.max_connections, "connections the generator may open")
      ->check(number_range(1, 1 << 20))
      ->capture_default_str();
  bench.add_option("--requests-out", flags.options.requests_out, "write every request's timings as JSON lines to FILE");
  bench.add_flag("!--no-early-stop", flags.options.early_stop,
                 "run every certification trial to the end of its schedule, even once an SLO is lost");
  bench.add_flag("!--no-calibration", flags.options.calibration,
                 "do not look up or measure the load generator's ceiling before benching");
  bench.add_option("--svg", flags.options.svg_dir,
                   "write latency_vs_rate.svg, steady_state.svg (Eq. 1), latency_cdf.svg and timeline.svg into DIR");
  bench.add_option("--html", flags.options.html,
                   "write a self-contained HTML report (charts inline, nothing fetched) to FILE");
  add_format_option(bench, flags.format);
  add_output_option(bench, flags.output, "write the result to FILE instead of stdout");
}

// --calibrate: the load generator's own ceiling against a loopback no-op endpoint.
void
run_ceiling_measurement(const BenchFlags& flags, AppContext& ctx) {
  const auto envelope = bench::measure_generator_ceiling(1000, 256000, 2.0, flags.max_dispatch_lag_ms / 1e3);
  bench::record_ceiling(ctx.run_context(0), envelope);
  const Table steps = bench::ceiling_table(envelope);
  ctx.emit_result(flags.format,
                  {.json = {{"generator_max_rate", envelope.max_sustained_rate},
                            {"lag_bound_s", envelope.lag_bound_s},
                            {"steps", steps.to_json()}},
                   .table = steps,
                   .after = fmt::format("\nthe generator holds {:.0f} req/s open-loop with p99 dispatch lag "
                                        "<= {} ms on this machine\n",
                                        envelope.max_sustained_rate, flags.max_dispatch_lag_ms)},
                  flags.output);
}

// The exit a certificate's status calls for: 0 when feasible, else the documented error.
void
throw_unless_feasible(const bench::Certification& cert) {
  switch (cert.status) {
  case bench::CertificationStatus::feasible:
    return;
  case bench::CertificationStatus::interrupted:
    throw Interrupted("bench interrupted");
  case bench::CertificationStatus::client_limited:
    throw GoalNotMet("CLIENT_LIMITED: " + cert.stop_reason);
  case bench::CertificationStatus::noisy:
    throw GoalNotMet("NOISY: " + cert.replicate_noise);
  case bench::CertificationStatus::infeasible:
    throw GoalNotMet("INFEASIBLE: " + (cert.binding.empty() ? cert.stop_reason : cert.binding));
  }
}

void
run_bench_command(const BenchFlags& flags, AppContext& ctx) {
  auto options = flags.options;
  options.api_key = api_key_or_environment(options.api_key);
  if (flags.rate > 0)
    options.rate = flags.rate;
  if (flags.concurrency > 0)
    options.concurrency = flags.concurrency;
  options.certify.summary.max_dispatch_lag_s = flags.max_dispatch_lag_ms / 1e3;
  auto context = ctx.run_context(0);
  const bool progress = !ctx.flags.quiet;
  const auto result = bench::run_bench(options, context, [&](const bench::TrialResult& trial) {
    if (progress)
      std::fprintf(stderr, "%s\n", bench::progress_line(trial).c_str());
  });
  ctx.emit_result(flags.format,
                  {.json = bench::to_json(result),
                   .table = bench::trials_table(result.certification),
                   .after = "\n" + bench::summary_line(result) + "\n"},
                  flags.output);
  throw_unless_feasible(result.certification);
}

} // namespace

void
register_bench(CLI::App& app, CommandRegistry& commands) {
  CLI::App* bench = app.add_subcommand(
      "bench", "Certify the highest request rate a server sustains under SLOs (closed-loop gate, open-loop search)");
  auto flags = std::make_shared<BenchFlags>();
  add_target_options(*bench, *flags);
  add_workload_options(*bench, *flags);
  add_certification_options(*bench, *flags);
  add_output_options(*bench, *flags);
  commands.add({"bench", bench, [flags](AppContext& ctx) {
                  if (flags->calibrate)
                    run_ceiling_measurement(*flags, ctx);
                  else
                    run_bench_command(*flags, ctx);
                }});
}

} // namespace optkit::cmd
