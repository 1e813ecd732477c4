// eval tasks' own cost, side by side with the server alone: serve-deltas --mock (the real HTTP
// path, scheduler and engine, a model that computes nothing) answers GSM8K-format items — the
// gsm8k suite's 5-shot prompts, 256-token budget, strict and flexible filters — over the bundled
// arith problems. One run measures
//   server alone: the same request bodies sent by plain HTTP clients, nothing parsed or scored;
//   eval tasks:   generate_all + score_suite, what `optkit eval tasks` does per item;
//   cached:       a re-run answered from the response cache (the client-side scoring ceiling).
// The goal: ≥ 500 scored items/s, and eval tasks within a few percent of the server alone.
//   perf_eval_tasks [concurrency = 16] [items = 2000]
#include "core/resource_paths.hpp"
#include "engines/engine_process.hpp"
#include "eval/task_documents.hpp"
#include "eval/task_prompts.hpp"
#include "eval/task_requests.hpp"
#include "eval/task_scoring.hpp"
#include "eval/task_suite.hpp"
#include "http/openai_endpoint.hpp"
#include "server_alone.hpp"
#include "support/perf_args.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>

using namespace optkit;
using namespace optkit::eval;

namespace {

double
seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double
server_alone(const EndpointTarget& target, const std::vector<nlohmann::json>& bodies, int concurrency) {
  std::vector<std::string> requests;
  for (auto b : bodies) {
    b["model"] = target.model;
    requests.push_back(b.dump());
  }
  return perf_support::server_alone(target.url, "/v1/completions", requests, concurrency);
}

} // namespace

int
main(int argc, char** argv) {
  constexpr std::string_view kUsage = "perf_eval_tasks [concurrency = 16] [items = 2000]";
  const int concurrency = test::positional_number(argc, argv, 1, "concurrency", 16, 1, kUsage);
  const std::size_t count = test::positional_number<std::size_t>(argc, argv, 2, "items", 2000, 1, kUsage);
  const auto data = find_data_directory().path;
  auto suite = resolve_task_suite("gsm8k");
  const auto problems = load_documents(data / "profiles/suites/data/arith-test.jsonl");
  std::vector<Document> docs;
  while (docs.size() < count)
    docs.push_back(problems[docs.size() % problems.size()]);
  const auto items = build_task_items(suite, docs, load_documents(data / "profiles/suites/data/arith-fewshot.jsonl"));
  std::vector<nlohmann::json> bodies;
  for (const auto& item : items)
    bodies.push_back(request_body(suite, item));

  engines::LaunchOptions launch;
  launch.kind = engines::EngineKind::optkit;
  launch.settings.model = (data / "testdata/models/tiny-arith").string();
  launch.settings.port = 0;
  launch.settings.max_num_seqs = 256;
  launch.settings.extra_args = {"--mock"};
  launch.executable = OPTKIT_PERF_BINARY;
  launch.directory = std::filesystem::temp_directory_path();
  engines::EngineProcess engine(launch);
  EndpointTarget target{http::openai_base_url(engine.url()), "", {}, "perf"};
  http::Client control(target.url);
  target.model = http::listed_models(control).front();

  fmt::print("{} GSM8K-format items (5-shot prompts, max_tokens {}), {} in flight, serve-deltas --mock\n", count,
             suite.max_gen_toks, concurrency);
  server_alone(target, std::vector<nlohmann::json>(bodies.begin(), bodies.begin() + 100), concurrency); // warm-up
  const double alone = server_alone(target, bodies, concurrency);

  const auto cache_dir = std::filesystem::temp_directory_path() / fmt::format("optkit_perf_eval_{}", ::getpid());
  std::filesystem::remove_all(cache_dir);
  const ResponseCache cache(cache_dir);
  RequestOptions options;
  options.concurrency = concurrency;
  SuiteScores scores;
  // One pass of eval tasks' per-item work: the requests, then scoring every response.
  const auto pass = [&] {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::string> responses;
    for (const auto& g : generate_all(target, "/v1/completions", bodies, options))
      responses.push_back(g.text);
    scores = score_suite(suite, items, responses);
    return static_cast<double>(count) / seconds_since(start);
  };
  const double uncached = pass();
  options.cache = &cache;
  const double filling = pass();
  const double cached = pass();
  const double alone_again = server_alone(target, bodies, concurrency);
  std::filesystem::remove_all(cache_dir);
  const double server = (alone + alone_again) / 2;

  fmt::print("  server alone (plain HTTP)      {:>8.0f} items/s   (mean of {:.0f} before, {:.0f} after)\n", server,
             alone, alone_again);
  fmt::print("  eval tasks, --no-cache         {:>8.0f} items/s   ({:.3f} of the server alone)\n", uncached,
             uncached / server);
  fmt::print("  eval tasks, filling the cache  {:>8.0f} items/s   ({:.3f} of the server alone)\n", filling,
             filling / server);
  fmt::print("  eval tasks, cached re-run      {:>8.0f} items/s\n", cached);
  fmt::print("  strict-match on the mock's canned text: {:.3f} (a check that scoring ran)\n",
             scores.metrics.empty() ? -1.0 : scores.metrics.back().mean());
  return 0;
}
