// Loglikelihood scoring's own cost, side by side with the server alone: serve-deltas on tiny-base
// scores 1,000 four-choice items in MMLU's format (the bundled sample's questions, each made
// unique, so that no request repeats another's whole prompt). Alternating, twice each:
//   server alone: the same token-id request bodies, already built, sent by plain HTTP clients;
//   eval tasks:   what `optkit eval tasks` does per suite — the requests built from the documents
//                 (templates, lm-eval's _encode_pair), sent, their echoed logprobs read, and the
//                 items scored.
// The goal: eval tasks ≥ 0.9 of the server alone, in requests (choices) per second.
//   perf_eval_loglikelihood [concurrency = 8] [items = 1000]
#include "core/resource_paths.hpp"
#include "engines/engine_process.hpp"
#include "eval/choice_items.hpp"
#include "eval/choice_scoring.hpp"
#include "eval/loglikelihood_requests.hpp"
#include "eval/task_documents.hpp"
#include "eval/task_suite.hpp"
#include "http/openai_endpoint.hpp"
#include "server_alone.hpp"
#include "support/perf_args.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

using namespace optkit;
using namespace optkit::eval;

namespace {

double
seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<Document>
unique_documents(const std::filesystem::path& sample, std::size_t count) {
  const auto base = load_documents(sample);
  std::vector<Document> docs;
  while (docs.size() < count) {
    auto doc = base[docs.size() % base.size()];
    doc["question"] = doc["question"].get<std::string>() + fmt::format(" (#{})", docs.size());
    docs.push_back(std::move(doc));
  }
  return docs;
}

} // namespace

int
main(int argc, char** argv) {
  constexpr std::string_view kUsage = "perf_eval_loglikelihood [concurrency = 8] [items = 1000]";
  const int concurrency = test::positional_number(argc, argv, 1, "concurrency", 8, 1, kUsage);
  const std::size_t count = test::positional_number<std::size_t>(argc, argv, 2, "items", 1000, 1, kUsage);
  const auto data = find_data_directory().path;
  const auto suite = resolve_task_suite("mmlu");
  const auto docs = unique_documents(suite.data, count);
  const auto model = data / "testdata/models/tiny-base";
  const auto tokenizer = model::Tokenizer::load_folder(model);

  engines::LaunchOptions launch;
  launch.kind = engines::EngineKind::optkit;
  launch.settings.model = model.string();
  launch.settings.port = 0;
  launch.executable = OPTKIT_PERF_BINARY;
  launch.directory = std::filesystem::temp_directory_path();
  engines::EngineProcess engine(launch);
  EndpointTarget target{http::openai_base_url(engine.url()), "", {}, "perf"};
  http::Client control(target.url);
  target.model = http::listed_models(control).front();

  // The server alone gets the bodies eval tasks sends, built beforehand.
  std::vector<std::string> requests;
  for (const auto& item : build_choice_items(suite, docs, {}))
    for (const auto& r : item.requests) {
      auto body =
          loglikelihood_request(encode_pair(tokenizer, r.context, r.continuation), suite.choice.max_length).body;
      body["model"] = target.model;
      requests.push_back(body.dump());
    }
  RequestOptions options;
  options.concurrency = concurrency;
  SuiteScores scores;
  const auto eval_tasks = [&] {
    const auto start = std::chrono::steady_clock::now();
    const auto items = build_choice_items(suite, docs, {});
    std::vector<ChoiceRequest> pairs;
    for (const auto& item : items)
      pairs.insert(pairs.end(), item.requests.begin(), item.requests.end());
    const auto lls = request_loglikelihoods(target, tokenizer, pairs, suite.choice.max_length, options);
    scores = score_multiple_choice(suite, items, lls.values);
    return static_cast<double>(pairs.size()) / seconds_since(start);
  };

  fmt::print("{} four-choice MMLU-format items ({} requests), {} in flight, serve-deltas on tiny-base\n", count,
             requests.size(), concurrency);
  const auto server_alone = [&](const std::vector<std::string>& bodies) {
    return perf_support::server_alone(target.url, "/v1/completions", bodies, concurrency);
  };
  server_alone(std::vector<std::string>(requests.begin(), requests.begin() + 200)); // warm-up
  double alone = 0, ours = 0;
  std::vector<std::string> rows;
  for (int round = 0; round < 2; ++round) {
    const double a = server_alone(requests);
    const double e = eval_tasks();
    rows.push_back(fmt::format("  round {}: server alone {:.0f} requests/s, eval tasks {:.0f} requests/s ({:.3f})",
                               round + 1, a, e, e / a));
    alone += a / 2;
    ours += e / 2;
  }
  for (const auto& r : rows)
    fmt::print("{}\n", r);
  fmt::print("  server alone (plain HTTP, bodies prebuilt)  {:>7.0f} requests/s\n", alone);
  fmt::print("  eval tasks (build, tokenize, send, score)   {:>7.0f} requests/s   ({:.3f} of the server alone)\n", ours,
             ours / alone);
  fmt::print("  acc on the sample's questions: {:.3f} (a check that scoring ran)\n",
             scores.metrics.empty() ? -1.0 : scores.metrics.front().mean());
  return 0;
}
