#include "tune/sim_fit_run.hpp"

#include "archive/run_archive.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "sim/sim_config.hpp"

#include <fmt/format.h>

#include <cmath>

namespace optkit::tune {

namespace {

double
p50(const nlohmann::json& summary, const char* name) {
  if (!summary.contains(name) || !summary.at(name).contains("p50") || !summary.at(name).at("p50").is_number())
    return 0;
  return summary.at(name).at("p50").get<double>();
}

std::vector<sim::ObservedTrial>
observed_trials(const archive::RunDetail& detail) {
  std::vector<sim::ObservedTrial> out;
  for (const auto& t : detail.trials) {
    if (t.result.is_null() || !t.params.contains("phase"))
      continue;
    const std::string phase = t.params.at("phase");
    sim::ObservedTrial o;
    if (phase == "gate") {
      o.concurrency = 1;
      o.label = "gate (closed loop, 1 stream)";
    } else if (t.params.contains("rate") && t.params.at("rate").is_number() && t.params.at("rate").get<double>() > 0) {
      o.rate = t.params.at("rate").get<double>();
      o.label = fmt::format("{} at {:.2f} req/s", phase, o.rate);
    } else {
      continue; // trace replays and unsized closed-loop trials carry no arrival pattern to replay
    }
    const auto& r = t.result;
    if (!r.value("passed", true) && r.value("client_limited", false))
      continue; // the generator, not the engine, set those latencies
    o.requests = r.value("measured", std::size_t{0});
    o.prompt_tokens = r.value("mean_input_tokens", 0.0);
    o.output_tokens = r.value("mean_output_tokens", 0.0);
    o.ttft = p50(r, "ttft_s");
    o.tpot = p50(r, "tpot_s");
    o.e2e = p50(r, "e2e_s");
    o.passed = r.value("passed", false);
    if (o.requests > 0 && o.e2e > 0)
      out.push_back(o);
  }
  return out;
}

std::string
setup_yaml(const SimFitOptions& options, const SimFitResult& r) {
  const auto& t = r.fit.timing;
  double prompt = 0, output = 0, rate = 0;
  for (const auto& o : r.trials) {
    prompt += o.prompt_tokens / static_cast<double>(r.trials.size());
    output += o.output_tokens / static_cast<double>(r.trials.size());
    if (o.rate > 0 && (o.passed || rate == 0))
      rate = o.passed ? std::max(rate, o.rate) : rate; // the highest rate that held
  }
  const std::string name = options.name.empty() ? fmt::format("calibrated-run-{}", r.bench_run) : options.name;
  return fmt::format("# Fitted by `optkit tune calibrate-sim {}` to bench run {} (RMS log error {:.3f}).\n"
                     "name: {}\n"
                     "description: step costs fitted to bench run {}\n"
                     "timing:\n  step_base_ms: {:.6g}\n  prefill_token_us: {:.6g}\n  decode_seq_us: {:.6g}\n"
                     "  noise_cv: {:.6g}\n"
                     "workload:\n  arrivals: poisson\n  rate: {:.6g}\n  prompt_mean: {:.6g}\n  prompt_log_sd: 0\n"
                     "  output_mean: {:.6g}\n  output_log_sd: 0\n"
                     "segment:\n  warmup_s: 10\n  min_duration_s: 60\n  min_completions: 1000\n  slo_s: {:.6g}\n",
                     r.bench_run, r.bench_run, r.fit.rms_log_error, name, r.bench_run, t.step_base_s * 1e3,
                     t.prefill_token_s * 1e6, t.decode_seq_s * 1e6, t.noise_cv, rate > 0 ? rate : 1.0,
                     std::max(1.0, prompt), std::max(1.0, output), options.slo_s);
}

} // namespace

SimFitResult
fit_simulator(const SimFitOptions& options, const archive::RunContext& context) {
  if (context.archive == nullptr)
    throw InputError("calibrate-sim reads a bench run from the archive");
  SimFitResult r;
  if (options.run == "last") { // the newest bench run (this invocation is itself the newest run)
    archive::RunFilter filter;
    filter.command = "bench";
    filter.limit = 1;
    const auto runs = context.archive->list_runs(filter);
    if (runs.empty())
      throw InputError("calibrate-sim last: the archive has no bench run");
    r.bench_run = runs.front().id;
  } else {
    r.bench_run = context.archive->resolve_run(options.run);
  }
  const auto detail = context.archive->load_run(r.bench_run);
  if (detail.run.command != "bench")
    throw InputError(
        fmt::format("calibrate-sim {}: run {} is '{}', not a bench run", options.run, r.bench_run, detail.run.command));
  r.trials = observed_trials(detail);
  if (r.trials.empty())
    throw InputError(fmt::format("calibrate-sim {}: bench run {} has no gate or open-loop trial with latencies",
                                 options.run, r.bench_run));
  sim::SimKnobs knobs;
  knobs.max_num_seqs = options.max_num_seqs;
  knobs.max_num_batched_tokens = options.max_num_batched_tokens;
  r.fit = sim::fit_timing(r.trials, knobs, sim::SimTiming{});
  r.yaml = setup_yaml(options, r);
  sim::parse_sim_setup(r.yaml, "<calibrated setup>"); // what is written must load
  if (!options.output.empty())
    write_file_atomic(options.output, r.yaml);
  if (context.run_id != 0) {
    context.archive->add_metric(context.run_id, std::nullopt, {"fit_rms_log_error", r.fit.rms_log_error, ""});
    context.archive->add_metric(context.run_id, std::nullopt, {"step_base_ms", r.fit.timing.step_base_s * 1e3, "ms"});
    context.archive->add_metric(context.run_id, std::nullopt,
                                {"prefill_token_us", r.fit.timing.prefill_token_s * 1e6, "us"});
    context.archive->add_metric(context.run_id, std::nullopt, {"decode_seq_us", r.fit.timing.decode_seq_s * 1e6, "us"});
    if (!options.output.empty())
      context.archive->add_artifact(context.run_id, std::nullopt, options.output, "sim-setup");
  }
  return r;
}

Table
sim_fit_table(const SimFitResult& r) {
  Table table({"trial", "requests", "prompt", "output", "ttft ms", "sim ttft ms", "tpot ms", "sim tpot ms", "e2e ms",
               "sim e2e ms"});
  const auto ms = [](double s) { return std::round(s * 1e5) / 100; };
  for (std::size_t i = 0; i < r.trials.size(); ++i) {
    const auto& o = r.trials[i];
    const auto& s = r.fit.simulated[i];
    table.add_row({o.label, o.requests, std::round(o.prompt_tokens), std::round(o.output_tokens), ms(o.ttft), ms(s[0]),
                   ms(o.tpot), ms(s[1]), ms(o.e2e), ms(s[2])});
  }
  return table;
}

nlohmann::json
to_json(const SimFitResult& r) {
  nlohmann::json trials = nlohmann::json::array();
  for (std::size_t i = 0; i < r.trials.size(); ++i) {
    const auto& o = r.trials[i];
    trials.push_back(
        {{"trial", o.label},
         {"requests", o.requests},
         {"measured", {{"ttft_s", o.ttft}, {"tpot_s", o.tpot}, {"e2e_s", o.e2e}}},
         {"simulated",
          {{"ttft_s", r.fit.simulated[i][0]}, {"tpot_s", r.fit.simulated[i][1]}, {"e2e_s", r.fit.simulated[i][2]}}}});
  }
  return {{"bench_run", r.bench_run},
          {"timing",
           {{"step_base_ms", r.fit.timing.step_base_s * 1e3},
            {"prefill_token_us", r.fit.timing.prefill_token_s * 1e6},
            {"decode_seq_us", r.fit.timing.decode_seq_s * 1e6}}},
          {"rms_log_error", r.fit.rms_log_error},
          {"evaluations", r.fit.evaluations},
          {"trials", trials},
          {"setup_yaml", r.yaml}};
}

} // namespace optkit::tune
