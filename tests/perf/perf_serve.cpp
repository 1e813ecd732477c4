// Server overhead of serve-deltas, side by side in one run: streamed completions per second
// through the whole path (HTTP, JSON, tokenizer, engine steps with the mock model, SSE chunks)
// against lib/http alone answering the same stream from a canned handler. Loopback clients are
// optkit's own http::Client on their own threads, so on a 2-core machine they share the cores
// with the server: the figures are what one box sustains end to end, not the server's ceiling.
//   perf_serve [seconds per run, default 5] [client threads, default 8]
#include "http/client.hpp"
#include "http/server.hpp"
#include "model/tokenizer.hpp"
#include "runtime/kv_cache.hpp"
#include "serve/api_server.hpp"
#include "serve/engine.hpp"
#include "serve/mock_model.hpp"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

using namespace optkit;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kBody = R"({"prompt": "Hello there", "max_tokens": 4, "stream": true, "ignore_eos": true})";

// Streams requests from `clients` threads for `seconds`; returns completed streams per second.
double
load(int port, int clients, double seconds) {
  std::atomic<long> completed{0}, failed{0};
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&] {
      http::Client client(http::parse_url("http://127.0.0.1:" + std::to_string(port)));
      while (Clock::now() < deadline) {
        std::string body;
        const auto r = client.stream("POST", "/v1/completions", kBody, [&](std::string_view piece) {
          body += piece;
          return true;
        });
        if (r.status == 200 && body.size() >= 14 && body.compare(body.size() - 14, 14, "data: [DONE]\n\n") == 0)
          ++completed;
        else
          ++failed;
      }
    });
  const auto started = Clock::now();
  for (auto& t : threads)
    t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
  if (failed > 0)
    fmt::print(stderr, "perf_serve: {} requests failed\n", failed.load());
  return double(completed.load()) / elapsed;
}

} // namespace

int
main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 5.0;
  const int clients = argc > 2 ? std::atoi(argv[2]) : 8;
  const std::filesystem::path base = std::filesystem::path(OPTKIT_SOURCE_DIR) / "testdata/models/tiny-base";

  // Baseline: lib/http alone, a canned stream of the same shape (4 token chunks, a finish chunk,
  // [DONE]) with no JSON parsing, tokenizer or engine.
  const std::string chunk =
      R"(data: {"id":"cmpl-0","object":"text_completion","created":0,"model":"tiny-base","choices":[{"index":0,"text":" tok","logprobs":null,"finish_reason":null}]})"
      "\n\n";
  http::Server canned({}, [&](const http::Request&, const std::shared_ptr<http::Exchange>& exchange) {
    exchange->start_stream(200, "text/event-stream");
    for (int i = 0; i < 5; ++i)
      exchange->send(chunk);
    exchange->send("data: [DONE]\n\n");
    exchange->finish();
  });
  canned.start();
  const double http_only = load(canned.port(), clients, seconds);
  canned.stop(std::chrono::seconds(1));

  // The whole path with the mock model.
  auto tokenizer = std::make_shared<const model::Tokenizer>(model::Tokenizer::load_folder(base));
  const auto config = model::load_model_config(base);
  runtime::KvCacheOptions kv_options;
  kv_options.budget_bytes = std::uint64_t{64} << 20;
  auto mock = std::make_unique<serve::MockModel>(config, tokenizer->encode(" a b c d", false),
                                                 std::chrono::microseconds(0), kv_options);
  const runtime::KvCache& kv = mock->kv_cache();
  serve::Engine engine(std::move(mock), kv, {256, 2048});
  serve::ApiServer server({}, {});
  server.start();
  server.attach(engine,
                {"tiny-base", base.string(), {}, nullptr, tokenizer, std::nullopt, config.max_position_embeddings});
  const double full = load(server.port(), clients, seconds);
  server.stop(std::chrono::seconds(1));
  engine.stop();

  fmt::print("streamed completions/s ({} client threads, {:.0f} s each, {} hardware threads)\n", clients, seconds,
             std::thread::hardware_concurrency());
  fmt::print("  lib/http, canned stream     {:>9.0f}\n", http_only);
  fmt::print("  serve-deltas --mock (full)  {:>9.0f}   ({:.2f} of lib/http alone)\n", full, full / http_only);
  return 0;
}
