#include "bench/bench_run.hpp"

#include "bench/arrivals.hpp"
#include "bench/bench_html.hpp"
#include "bench/bench_plots.hpp"
#include "bench/bench_report.hpp"
#include "bench/load_generator.hpp"
#include "bench/prompt_synthesis.hpp"
#include "bench/request_trace.hpp"
#include "bench/saturation_stop.hpp"
#include "bench/server_settle.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/resource_paths.hpp"
#include "engines/engine_process.hpp"
#include "http/client.hpp"
#include "http/openai_endpoint.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace optkit::bench {

namespace {

// Live trials against an endpoint: requests drawn from the profile per trial (seeded), prompts
// synthesized to exact token counts, sent by the load generator.
class EndpointRunner final : public TrialRunner {
public:
  EndpointRunner(const ServingProfile& profile, const std::string& model, const TokenCodec& codec,
                 const std::string& corpus, GeneratorOptions generator, std::uint64_t seed)
      : m_profile(profile)
      , m_model(model)
      , m_prompts(codec, corpus, profile.shared_prefix_tokens, seed, {}, profile.shared_prefix_groups)
      , m_generator(std::move(generator))
      , m_seed(seed) {}

  // The gate's requests (and the probe, its first) are never abandoned: they measure the server.
  // A multi-turn profile's gate is one user holding one conversation after another.
  TrialRecording closed_loop(std::size_t count, int concurrency) override {
    if (m_profile.multi_turn())
      return m_generator.closed_loop(prepare_conversations(count, m_seed, false), concurrency);
    return m_generator.closed_loop(never_abandoned(prepare(count, m_seed)), count, concurrency);
  }
  // The probe is the gate's first request, sent alone.
  SettleReport settle(double probe_limit_s, double timeout_s) override {
    if (m_probe.empty())
      m_probe = never_abandoned(prepare(1, m_seed));
    return settle_server(m_generator, m_probe.front(), probe_limit_s, timeout_s);
  }
  TrialRecording open_loop(double rate, std::size_t count, std::uint64_t seed) override {
    if (m_profile.multi_turn())
      return conversations_open_loop(rate, count, seed);
    ArrivalOptions arrivals{m_profile.arrival, rate, m_profile.burstiness, seed};
    const auto offsets = arrival_offsets(arrivals, count);
    GiveUp give_up;
    if (!m_stop_slos.empty())
      give_up = [this, window = measurement_window(offsets, m_warmup, m_cooldown)](
                    std::span<const RequestProgress> sent, double now) {
        return slo_already_lost(m_stop_slos, sent, now, window);
      };
    return m_generator.open_loop(prepare(count, seed), offsets, give_up);
  }
  // Open-loop trials end as soon as one of `slos` is lost (saturation_stop.hpp).
  void stop_when_lost(const SummaryOptions& summary) {
    m_stop_slos = summary.slos;
    m_warmup = summary.warmup_fraction;
    m_cooldown = summary.cooldown_fraction;
  }
  // The trace's own times (divided by time_scale) and, where it gives them, its lengths and
  // prefix blocks (of `block_tokens` each).
  TrialRecording replay(const std::vector<TraceRequest>& trace, double time_scale, std::int64_t block_tokens,
                        std::uint64_t seed) {
    auto plan = plan_requests(m_profile, trace.size(), seed);
    std::vector<double> timestamps;
    for (std::size_t i = 0; i < trace.size(); ++i) {
      timestamps.push_back(trace[i].timestamp);
      if (trace[i].input_tokens > 0)
        plan[i].input_tokens = trace[i].input_tokens;
      if (trace[i].output_tokens > 0)
        plan[i].output_tokens = trace[i].output_tokens;
      plan[i].prefix_blocks = trace[i].prefix_blocks;
    }
    m_block_tokens = block_tokens;
    // Rows in time order, so request i is the i-th to leave.
    std::vector<std::size_t> order(trace.size());
    for (std::size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return timestamps[a] < timestamps[b]; });
    std::vector<PlannedRequest> ordered;
    for (std::size_t i : order)
      ordered.push_back(plan[i]);
    return m_generator.open_loop(build(ordered, seed), replay_offsets(timestamps, time_scale));
  }

private:
  // Conversations start at the rate that makes their turns `rate` requests per second (each
  // conversation's first turn at its arrival, the later ones as answers come back).
  TrialRecording conversations_open_loop(double rate, std::size_t count, std::uint64_t seed) {
    const auto conversations = prepare_conversations(count, seed, true);
    std::vector<double> turns;
    for (const auto& c : conversations)
      turns.push_back(static_cast<double>(c.turns.size()));
    const double conversation_rate = rate * static_cast<double>(conversations.size()) / static_cast<double>(count);
    const auto starts =
        arrival_offsets({m_profile.arrival, conversation_rate, m_profile.burstiness, seed}, conversations.size());
    GiveUp give_up;
    if (!m_stop_slos.empty())
      give_up = [this, window = measurement_window(starts, m_warmup, m_cooldown, turns)](
                    std::span<const RequestProgress> sent, double now) {
        return slo_already_lost(m_stop_slos, sent, now, window);
      };
    return m_generator.open_loop(conversations, starts, give_up);
  }

  // Conversations of `count` turns in all. As prepare() does, at most 2048 distinct prompts: past
  // them the conversations repeat in turn.
  std::vector<PreparedConversation> prepare_conversations(std::size_t count, std::uint64_t seed, bool abandons) {
    count = std::max<std::size_t>(count, 1);
    m_prompts.reseed(seed);
    std::vector<PreparedConversation> distinct;
    for (const auto& planned : plan_conversations(m_profile, std::min<std::size_t>(count, 2048), seed)) {
      PreparedConversation conversation{build_requests(planned), m_profile.think_time_s};
      if (!abandons)
        conversation.turns = never_abandoned(std::move(conversation.turns));
      distinct.push_back(std::move(conversation));
    }
    std::vector<PreparedConversation> out;
    for (std::size_t turns = 0; turns < count; turns += out.back().turns.size())
      out.push_back(distinct[out.size() % distinct.size()]);
    return out;
  }

  static std::vector<PreparedRequest> never_abandoned(std::vector<PreparedRequest> requests) {
    for (auto& r : requests)
      r.cancel_after_s = -1;
    return requests;
  }

  // At most 2048 distinct prompts per trial (requests beyond reuse them in turn), so a long
  // trial does not spend minutes counting tokens through a server's /tokenize.
  std::vector<PreparedRequest> prepare(std::size_t count, std::uint64_t seed) {
    return build(plan_requests(m_profile, std::min<std::size_t>(std::max<std::size_t>(count, 1), 2048), seed), seed);
  }

  std::vector<PreparedRequest> build(const std::vector<PlannedRequest>& plan, std::uint64_t seed) {
    m_prompts.reseed(seed);
    return build_requests(plan);
  }

  // The requests of `plan`; a multi-turn profile's plan is one conversation's turns.
  std::vector<PreparedRequest> build_requests(const std::vector<PlannedRequest>& plan) {
    std::vector<PreparedRequest> out;
    out.reserve(plan.size());
    for (const auto& planned : plan) {
      const bool later_turn = m_profile.multi_turn() && !out.empty(); // a conversation's: no shared prefix
      const auto prompt = later_turn ? m_prompts.make_unprefixed(planned.input_tokens)
                          : planned.prefix_blocks.empty()
                              ? m_prompts.make(planned.input_tokens, planned.prefix_group)
                              : m_prompts.make_from_blocks(planned.prefix_blocks, planned.input_tokens, m_block_tokens);
      nlohmann::json body = {{"model", m_model},
                             {"max_tokens", planned.output_tokens},
                             {"stream", true},
                             {"stream_options", {{"include_usage", true}}},
                             {"temperature", m_profile.temperature}};
      if (m_profile.ignore_eos) {
        body["ignore_eos"] = true;
        body["min_tokens"] = planned.output_tokens;
      }
      if (m_profile.api == Api::chat)
        body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", prompt.text}}});
      else
        body["prompt"] = prompt.text;
      out.push_back({body.dump(), prompt.tokens, planned.output_tokens, planned.cancel_after_s});
    }
    return out;
  }

  const ServingProfile& m_profile;
  std::string m_model;
  PromptSynthesizer m_prompts; // the corpus encoded once (through /tokenize: one call, not one per trial)
  LoadGenerator m_generator;
  std::uint64_t m_seed;
  std::vector<PreparedRequest> m_probe;
  std::int64_t m_block_tokens = 512; // a Mooncake trace's tokens per block id
  std::vector<SloRule> m_stop_slos;  // empty: every trial runs its whole schedule
  double m_warmup = 0, m_cooldown = 0;
};

void
archive_trial(const archive::RunContext& context, const TrialResult& trial) {
  if (!context.recording())
    return;
  auto& a = *context.archive;
  const auto id =
      a.begin_trial(context.run_id, trial.index, 1,
                    {{"phase", to_string(trial.phase)},
                     {"rate", trial.phase == TrialPhase::gate ? nlohmann::json(nullptr) : nlohmann::json(trial.rate)},
                     {"requests", trial.planned_requests}});
  archive::TrialEnd end;
  end.status = trial.passed ? archive::TrialStatus::succeeded : archive::TrialStatus::failed;
  end.error = trial.summary.failure;
  auto result = to_json(trial.summary);
  result["passed"] = trial.passed;
  end.result = result;
  a.finish_trial(id, end);
  const auto& s = trial.summary;
  const std::vector<archive::NewMetric> metrics = {{"request_throughput", s.request_throughput, "req/s"},
                                                   {"output_token_throughput", s.output_token_throughput, "tok/s"},
                                                   {"goodput", s.goodput, "req/s"},
                                                   {"ttft_p95", s.ttft.p95, "s"},
                                                   {"tpot_p50", s.tpot.p50, "s"},
                                                   {"e2e_p95", s.e2e.p95, "s"},
                                                   {"e2e_p99", s.e2e.p99, "s"},
                                                   {"dispatch_lag_p99", s.dispatch_lag.p99, "s"},
                                                   {"beta", s.steady.beta, ""},
                                                   {"error_rate", s.error_rate, ""}};
  for (const auto& metric : metrics)
    a.add_metric(context.run_id, id, metric);
}

std::unique_ptr<engines::EngineProcess>
launch_engine(const BenchOptions& options, const archive::RunContext& context) {
  engines::LaunchOptions launch;
  launch.kind = engines::parse_engine(options.engine);
  launch.settings.model = options.model;
  launch.settings.port = 0;
  launch.settings.extra_args = options.engine_args;
  launch.executable = options.engine_executable;
  if (launch.executable.empty() && launch.kind == engines::EngineKind::optkit)
    launch.executable = executable_path().string();
  launch.ready_timeout_s = options.engine_timeout_s;
  launch.directory = context.recording()
                         ? context.archive->run_directory(context.run_id) / "engine"
                         : std::filesystem::temp_directory_path() / fmt::format("optkit-engine-{}", ::getpid());
  return std::make_unique<engines::EngineProcess>(std::move(launch));
}

// --rate, --concurrency or --trace: one trial, reported in the certification's shape.
Certification
single_trial(EndpointRunner& runner, const BenchOptions& options, const CertifyOptions& certify_options,
             const std::vector<TraceRequest>& trace, const std::function<void(const TrialResult&)>& on_each) {
  TrialResult trial;
  auto summary_options = certify_options.summary;
  if (!trace.empty()) {
    trial.phase = TrialPhase::trace;
    trial.planned_requests = trace.size();
    trial.recording = runner.replay(trace, options.time_scale, options.trace_block_tokens, certify_options.seed + 1);
    const auto& sent = trial.recording.requests;
    const double span = sent.empty() ? 0.0 : sent.back().intended - sent.front().intended;
    trial.rate = span > 0 ? static_cast<double>(sent.size() - 1) / span : 0.0;
  } else if (options.rate) {
    trial.phase = TrialPhase::rate;
    trial.rate = *options.rate;
    trial.planned_requests = options.requests > 0 ? options.requests : trial_requests(certify_options, trial.rate);
    trial.recording = runner.open_loop(trial.rate, trial.planned_requests, certify_options.seed + 1);
  } else {
    trial.phase = TrialPhase::concurrency;
    trial.planned_requests = options.requests > 0 ? options.requests : certify_options.min_requests;
    trial.recording = runner.closed_loop(trial.planned_requests, *options.concurrency);
    summary_options.open_loop = false;
  }
  trial.summary = summarize_trial(trial.recording, summary_options);
  trial.passed = trial.summary.failure.empty();
  trial.client_limited = trial.summary.client_limited;
  on_each(trial);
  Certification c;
  c.status = trial.recording.interrupted ? CertificationStatus::interrupted
             : trial.client_limited      ? CertificationStatus::client_limited
             : trial.passed              ? CertificationStatus::feasible
                                         : CertificationStatus::infeasible;
  c.certified_rate = trial.passed && trial.phase != TrialPhase::concurrency ? trial.rate : 0.0;
  c.binding = trial.summary.failure;
  c.stop_code = StopCode::single_trial;
  c.stop_reason = "a single trial was asked for";
  c.trials.push_back(std::move(trial));
  return c;
}

// latency_vs_rate.svg, and of the certified trial (else the last open-loop one) steady_state.svg,
// latency_cdf.svg and timeline.svg: the charts of the HTML report, one file each.
std::vector<std::filesystem::path>
write_plots(const Certification& c, const std::vector<SloRule>& slos, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  std::vector<std::filesystem::path> plots;
  const auto plot = [&](const char* name, const std::string& svg) {
    plots.push_back(dir / name);
    write_file_atomic(plots.back(), svg);
  };
  plot("latency_vs_rate.svg", latency_vs_rate_svg(c, slos));
  if (const auto* shown = shown_trial(c)) {
    plot("steady_state.svg", steady_state_svg(*shown));
    plot("latency_cdf.svg", latency_cdf_svg(*shown, slos));
    plot("timeline.svg", timeline_svg(*shown));
  }
  return plots;
}

} // namespace

BenchResult
run_bench(const BenchOptions& options, const archive::RunContext& context,
          const std::function<void(const TrialResult&)>& on_trial) {
  if (options.endpoint.empty() == options.engine.empty())
    throw InputError(options.endpoint.empty()
                         ? "--endpoint URL (a running OpenAI-compatible server) or --engine KIND --model M is required"
                         : "--endpoint and --engine are exclusive: bench a running server, or one bench launches");
  if (!options.engine.empty() && options.model.empty())
    throw InputError("--engine needs --model: the model (folder or Hugging Face id) the engine serves");
  if ((options.rate ? 1 : 0) + (options.concurrency ? 1 : 0) + (options.trace.empty() ? 0 : 1) > 1)
    throw InputError("--rate, --concurrency and --trace are exclusive: one open-loop rate, one closed-loop "
                     "concurrency or one trace replay");
  if (!(options.time_scale > 0))
    throw InputError("--time-scale must be positive");
  const auto trace = options.trace.empty()
                         ? std::vector<TraceRequest>{}
                         : load_request_trace(options.trace, parse_trace_format(options.trace_format));
  if (options.rate && !(*options.rate > 0))
    throw InputError("--rate must be a positive number of requests per second");
  if (options.concurrency && *options.concurrency < 1)
    throw InputError("--concurrency must be at least 1");
  BenchResult result;
  result.profile = resolve_serving_profile(options.profile);
  if (!trace.empty() && result.profile.multi_turn())
    throw InputError(fmt::format("--trace replays single requests; profile {} has conversation: turns (give a profile "
                                 "without them, or certify the conversations without --trace)",
                                 result.profile.name));
  auto certify_options = options.certify;
  certify_options.summary.slos = options.slos.empty() ? result.profile.slos : parse_slos(options.slos);
  if (certify_options.initial_rate <= 0 && result.profile.planned_rate > 0)
    certify_options.initial_rate = result.profile.planned_rate;
  const std::string corpus = options.corpus.empty() ? default_corpus_text() : read_input_file(options.corpus);

  // --engine: the server lives for this run only; leaving this scope (done, failed, Ctrl-C)
  // stops its whole process group.
  std::unique_ptr<engines::EngineProcess> engine;
  if (!options.engine.empty())
    engine = launch_engine(options, context);
  const auto url = http::openai_base_url(engine ? engine->url() : options.endpoint);
  result.endpoint = url.text;
  http::ClientOptions client_options;
  // --request-timeout bounds every call: /v1/models and the token counting too.
  const auto request_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(options.request_timeout_s * 1000));
  client_options.connect_timeout = std::min(std::chrono::milliseconds(5000), request_timeout);
  client_options.request_timeout = request_timeout;
  if (!options.api_key.empty())
    client_options.headers.emplace_back("Authorization", "Bearer " + options.api_key);
  http::Client control(url, client_options);
  const auto models = http::listed_models(control); // reachability and the key, before any trial
  // An engine is asked for its model by path or id; requests name it as the engine lists it.
  result.model = options.model.empty() || engine ? models.front() : options.model;
  if (std::find(models.begin(), models.end(), result.model) == models.end()) {
    std::string names;
    for (const auto& name : models)
      names += (names.empty() ? "" : ", ") + name;
    throw InputError(fmt::format("--model {}: {} does not serve it (it serves: {})", result.model, url.text, names));
  }
  const auto codec = options.tokenizer.empty() ? server_codec(control, result.model) : local_codec(options.tokenizer);
  result.token_counter = codec->source();

  GeneratorOptions generator;
  generator.endpoint = url;
  generator.path = result.profile.api == Api::chat ? "/v1/chat/completions" : "/v1/completions";
  generator.headers = client_options.headers;
  generator.request_timeout_s = options.request_timeout_s;
  generator.max_connections = options.max_connections;
  EndpointRunner runner(result.profile, result.model, *codec, corpus, generator, certify_options.seed);
  const bool certifying = !options.rate && !options.concurrency && trace.empty();
  if (certifying && options.early_stop)
    runner.stop_when_lost(certify_options.summary);

  if (options.calibration)
    result.ceiling = generator_ceiling(context, certify_options.summary.max_dispatch_lag_s);
  const auto on_each = [&](const TrialResult& trial) {
    archive_trial(context, trial);
    if (on_trial)
      on_trial(trial);
  };
  result.certification = !certifying ? single_trial(runner, options, certify_options, trace, on_each)
                                     : certify(runner, certify_options, on_each);
  result.slos = certify_options.summary.slos;
  const auto& c = result.certification;
  std::size_t requests = 0, failed = 0;
  for (const auto& t : c.trials) {
    requests += t.recording.requests.size();
    for (const auto& r : t.recording.requests)
      failed += r.ok() || r.cancelled ? 0u : 1u;
  }
  if (requests > 0 && failed == requests)
    throw RuntimeFailure(fmt::format("--endpoint {}: every request failed ({}) — is the server up and serving '{}'?",
                                     url.text, c.trials.front().recording.requests.front().error, result.model));
  if (!options.requests_out.empty())
    write_request_rows(c, options.requests_out);
  const auto plots = options.svg_dir.empty() ? std::vector<std::filesystem::path>{}
                                             : write_plots(c, certify_options.summary.slos, options.svg_dir);
  if (engine)
    result.engine = engine->record();
  if (!options.html.empty())
    write_file_atomic(options.html, bench_report_html(result));
  if (context.recording()) {
    context.archive->add_metric(context.run_id, std::nullopt, {"certified_rate", c.certified_rate, "req/s"});
    if (engine)
      context.archive->add_artifact(context.run_id, std::nullopt, engine->log_file(), "engine-log");
    if (!options.requests_out.empty())
      context.archive->add_artifact(context.run_id, std::nullopt, options.requests_out, "requests");
    for (const auto& plot : plots)
      context.archive->add_artifact(context.run_id, std::nullopt, plot, "plot");
    if (!options.html.empty())
      context.archive->add_artifact(context.run_id, std::nullopt, options.html, "report");
  }
  return result;
}

std::string
summary_line(const BenchResult& result) {
  const auto& c = result.certification;
  return fmt::format("{}: {:.4g} req/s certified{}{} ({}; model {}, profile {})", to_string(c.status), c.certified_rate,
                     c.lowest_failing > 0 ? fmt::format(", {:.4g} req/s failed", c.lowest_failing) : std::string(),
                     c.binding.empty() ? std::string() : "; binding: " + c.binding, c.stop_reason, result.model,
                     result.profile.name);
}

nlohmann::json
to_json(const BenchResult& result) {
  auto out = to_json(result.certification);
  out["model"] = result.model;
  out["endpoint"] = result.endpoint;
  out["profile"] = result.profile.name;
  out["token_counter"] = result.token_counter;
  nlohmann::json slos = nlohmann::json::array();
  for (const auto& rule : result.slos)
    slos.push_back(rule.text);
  out["slos"] = slos;
  out["engine"] = result.engine;
  if (result.ceiling)
    out["generator_ceiling"] = {{"max_rate", result.ceiling->max_rate},
                                {"lag_bound_s", result.ceiling->lag_bound_s},
                                {"source", result.ceiling->source}};
  else
    out["generator_ceiling"] = nullptr;
  return out;
}

} // namespace optkit::bench
