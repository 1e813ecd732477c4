// `optkit bench` as a library call: resolve the target (endpoint, model, token counter), build
// requests from the serving profile, then certify (Algorithm 1), or run a single open-loop rate
// or closed-loop concurrency; every trial is archived as a trial row of the run with its
// metrics, and the per-request rows as an artifact.
#pragma once

#include "archive/run_context.hpp"
#include "bench/certification.hpp"
#include "bench/generator_ceiling.hpp"
#include "bench/serving_profile.hpp"

#include <optional>
#include <string>
#include <vector>

namespace optkit::bench {

struct BenchOptions {
  std::string endpoint; // http://host:port (a trailing /v1 is accepted)
  // Or an engine to launch for the run (--engine): its kind, --model is what it serves.
  std::string engine;
  std::string engine_executable;        // empty: found on PATH (optkit: this binary)
  std::vector<std::string> engine_args; // appended to its command line
  double engine_timeout_s = 900;        // to become ready
  std::string model;                    // empty: the first model /v1/models lists
  std::string api_key;                  // sent as Authorization: Bearer
  std::string profile = "chat-small";
  std::string tokenizer; // model folder whose tokenizer.json counts tokens (empty: the server's /tokenize)
  std::string corpus;    // text prompts are cut from (empty: profiles/serving/corpus.txt)
  std::vector<std::string> slos;
  CertifyOptions certify;
  std::optional<double> rate;            // one open-loop trial at this rate instead of certifying
  std::optional<int> concurrency;        // one closed-loop trial with this many streams
  std::string trace;                     // replay this request trace instead of certifying (request_trace.hpp)
  std::string trace_format = "auto";     // auto | jsonl | mooncake | azure
  std::int64_t trace_block_tokens = 512; // a Mooncake trace's tokens per hash id
  double time_scale = 1;                 // trace replay speed: 2 = twice as fast
  std::size_t requests = 0;              // for --rate / --concurrency (0: sized as for certification)
  double request_timeout_s = 120;
  std::size_t max_connections = 4096;
  std::string requests_out; // per-request JSON lines (also archived)
  bool calibration = true;  // find or measure the generator's ceiling first
  bool early_stop = true;   // certification trials end once an SLO is lost (saturation_stop.hpp)
  std::string svg_dir;      // latency_vs_rate, steady_state, latency_cdf and timeline .svg (also archived)
  std::string html;         // the report for people (bench_html.hpp; also archived)
};

struct BenchResult {
  Certification certification;
  std::string model;
  std::string endpoint;
  std::string token_counter;
  ServingProfile profile;
  std::vector<SloRule> slos; // as applied: --slo, else the profile's
  std::optional<GeneratorCeiling> ceiling;
  nlohmann::json engine; // what was launched and what it reported (null for --endpoint)
  bool single_trial = false;
};

// Throws InputError (exit 2) on bad options, RuntimeFailure (exit 3) when the endpoint is not
// reachable or stops answering entirely. `on_trial` gets each trial as it ends.
BenchResult run_bench(const BenchOptions& options, const archive::RunContext& context,
                      const std::function<void(const TrialResult&)>& on_trial = {});

nlohmann::json to_json(const BenchResult& result);
// "FEASIBLE: 164.4 req/s certified, 171.2 req/s failed; binding: … (why it stopped; model, profile)".
std::string summary_line(const BenchResult& result);

} // namespace optkit::bench
