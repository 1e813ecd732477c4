// Server overhead of serve-deltas, side by side in one run: streamed completions per second
// through the whole path (HTTP, JSON, tokenizer, engine steps with the mock model, SSE chunks)
// against lib/http alone answering the same stream from a canned handler. Two loopback clients
// load each: blocking http::Client threads (one request in flight each), and, as wrk does, one
// I/O thread keeping many keep-alive connections busy (http::AsyncClient). On a 2-core machine
// either shares the cores with the server: the figures are what one box sustains end to end.
//   perf_serve [seconds per run, default 5] [client threads, default 8] [async connections, default 32]
#include "http/async_client.hpp"
#include "http/client.hpp"
#include "http/server.hpp"
#include "support/mock_serving.hpp"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace optkit;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kBody = R"({"prompt": "Hello there", "max_tokens": 4, "stream": true, "ignore_eos": true})";

// A stream that arrived whole ends with the [DONE] event.
bool
complete_stream(const std::string& body) {
  return body.ends_with("data: [DONE]\n\n");
}

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
        if (r.status == 200 && complete_stream(body))
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

// Keeps `connections` streams in flight from one I/O thread for `seconds`, each connection's next
// request sent as its last one ends; returns completed streams per second.
double
load_async(int port, int connections, double seconds) {
  http::AsyncClientOptions options;
  options.max_connections = static_cast<std::size_t>(connections);
  http::AsyncClient client(http::parse_url("http://127.0.0.1:" + std::to_string(port)), options);
  std::atomic<long> completed{0}, failed{0};
  const auto started = Clock::now();
  const auto deadline = started + std::chrono::duration<double>(seconds);
  std::function<void()> start_one = [&] {
    auto body = std::make_shared<std::string>();
    client.submit({"POST", "/v1/completions", kBody, "application/json"},
                  {nullptr,
                   [body](std::string_view piece) {
                     *body += piece;
                     return true;
                   },
                   [&, body](http::AsyncResult r) {
                     if (r.status == 200 && r.error.empty() && complete_stream(*body))
                       ++completed;
                     else
                       ++failed;
                     if (Clock::now() < deadline)
                       start_one();
                   }});
  };
  for (int c = 0; c < connections; ++c)
    start_one();
  std::this_thread::sleep_until(deadline);
  while (client.in_flight() > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
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
  const int connections = argc > 3 ? std::atoi(argv[3]) : 32;
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
  const double http_only_async = load_async(canned.port(), connections, seconds);
  canned.stop(std::chrono::seconds(1));

  // The whole path with the mock model.
  double full = 0, full_async = 0;
  {
    test::MockServing serving(base, {});
    full = load(serving.port(), clients, seconds);
    full_async = load_async(serving.port(), connections, seconds);
  }

  fmt::print("streamed completions/s ({:.0f} s each, {} hardware threads)\n", seconds,
             std::thread::hardware_concurrency());
  fmt::print("                              {:>2} client threads   1 I/O thread, {} connections\n", clients,
             connections);
  fmt::print("  lib/http, canned stream     {:>9.0f}            {:>9.0f}\n", http_only, http_only_async);
  fmt::print("  serve-deltas --mock (full)  {:>9.0f}            {:>9.0f}\n", full, full_async);
  fmt::print("  full / lib/http alone       {:>9.2f}            {:>9.2f}\n", full / http_only,
             full_async / http_only_async);
  return 0;
}
