// A normal completion's latency while a hostile client sends worst-case bodies as fast as it can
// (issue 39's goal: p99 within 2x of the idle p99), side by side in one run against one
// serve-deltas --mock server built as `optkit serve-deltas` builds it (its 32 MiB body cap). A
// victim client sends short completions 5 ms apart; each hostile kind then runs on its own
// keep-alive connections, back to back, while the victim measures again:
//   huge-prompt   a prompt string just under the body cap (tokenizing it is the costliest work)
//   huge-ids      a prompt of token ids just under the body cap
//   many-keys     an object with the 10,000 keys the parser allows, in an ignored field
//   deep          nesting past the parser's depth cap, just under the body cap
//   over-cap      a body one byte over the cap (refused from its Content-Length)
// The attacker runs in this process, on the server's cores. A remote attacker spends another
// machine's CPU on sending, so by default the hostile threads run at SCHED_IDLE: they send as fast
// as the cores the server leaves idle allow (the hostile-bodies column says how fast that was),
// and the victim's latency measures the server's own work on the hostile bytes. `normal` gives
// them the server's priority (an attacker on the same host).
//   perf_serve_hostile [seconds per phase, default 10] [hostile connections, default 2]
//                      [bulk body bytes, default serve-deltas' 65536; 0: every body on the I/O thread]
//                      [attacker priority: idle (default) or normal] [only this hostile kind]
#include "core/statistics.hpp"
#include "http/client.hpp"
#include "serve/serve_run.hpp"
#include "support/mock_serving.hpp"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

using namespace optkit;
using SteadyClock = std::chrono::steady_clock;

namespace {

constexpr double kVictimInterval = 0.005; // seconds between victim requests
const std::string kVictimBody = R"({"prompt": "Hello there", "max_tokens": 2, "ignore_eos": true})";

struct HostileBody {
  std::string kind;
  std::string body;
};

std::vector<HostileBody>
hostile_bodies(std::size_t cap) {
  const std::size_t room = cap - 64; // the JSON around the payload
  std::vector<HostileBody> bodies;
  bodies.push_back({"huge-prompt", R"({"max_tokens": 1, "prompt": ")" + std::string(room, 'a') + "\"}"});
  std::string ids = R"({"max_tokens": 1, "prompt": [1)";
  while (ids.size() < room)
    ids += ",1";
  bodies.push_back({"huge-ids", ids + "]}"});
  std::string keys = R"({"max_tokens": 1, "prompt": "hi", "user": {)";
  for (int k = 0; k < 10000; ++k)
    keys += fmt::format("{}\"k{}\": {}", k == 0 ? "" : ",", k, k);
  bodies.push_back({"many-keys", keys + "}}"});
  const std::size_t depth = room / 2;
  bodies.push_back({"deep", R"({"prompt": )" + std::string(depth, '[') + std::string(depth, ']') + "}"});
  bodies.push_back({"over-cap", R"({"prompt": ")" + std::string(cap, 'a') + "\"}"});
  return bodies;
}

// Sends victim completions one after another, 5 ms apart, for `phase_seconds`; returns each one's
// seconds, corrected for coordinated omission as wrk2 and HdrHistogram do: a request that took L
// also stands for the requests its wait kept from being sent, at L − 5 ms, L − 10 ms, ...
std::vector<double>
victim_latencies(int port, double phase_seconds) {
  http::Client client(http::parse_url("http://127.0.0.1:" + std::to_string(port)));
  std::vector<double> seconds;
  const auto deadline = SteadyClock::now() + std::chrono::duration<double>(phase_seconds);
  while (SteadyClock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::duration<double>(kVictimInterval));
    const auto started = SteadyClock::now();
    const auto r = client.request("POST", "/v1/completions", kVictimBody);
    if (r.status != 200)
      fmt::print(stderr, "perf_serve_hostile: a victim request got {}: {}\n", r.status, r.body);
    const double took = std::chrono::duration<double>(SteadyClock::now() - started).count();
    for (double waited = took; waited > 0; waited -= kVictimInterval)
      seconds.push_back(waited);
  }
  return seconds;
}

struct Phase {
  std::string name;
  std::size_t requests = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  long hostile_sent = 0;
};

// The calling thread runs only when a core would otherwise be idle (Linux's SCHED_IDLE).
void
run_at_idle_priority() {
  const sched_param none{};
  if (sched_setscheduler(0, SCHED_IDLE, &none) != 0)
    fmt::print(stderr, "perf_serve_hostile: SCHED_IDLE refused; the attacker keeps normal priority\n");
}

Phase
measure(int port, double phase_seconds, int connections, const HostileBody* hostile, bool idle_attacker) {
  std::atomic<bool> done{false};
  std::atomic<long> sent{0};
  std::vector<std::thread> attackers;
  for (int c = 0; hostile != nullptr && c < connections; ++c)
    attackers.emplace_back([&] {
      if (idle_attacker)
        run_at_idle_priority();
      http::ClientOptions options;
      options.request_timeout = std::chrono::seconds(120);
      while (!done) {
        try { // the server may close the connection after refusing a body: a new client then
          http::Client client(http::parse_url("http://127.0.0.1:" + std::to_string(port)), options);
          while (!done) {
            client.request("POST", "/v1/completions", hostile->body);
            ++sent;
          }
        } catch (const std::exception&) {
          ++sent;
        }
      }
    });
  if (hostile != nullptr)
    std::this_thread::sleep_for(std::chrono::milliseconds(200)); // the attack is under way
  auto seconds = victim_latencies(port, phase_seconds);
  done = true;
  for (auto& t : attackers)
    t.join();
  std::sort(seconds.begin(), seconds.end());
  return {hostile != nullptr ? hostile->kind : "idle", seconds.size(),       1e3 * percentile_of_sorted(seconds, 50),
          1e3 * percentile_of_sorted(seconds, 99),     1e3 * seconds.back(), sent.load()};
}

} // namespace

int
main(int argc, char** argv) {
  const double phase_seconds = argc > 1 ? std::atof(argv[1]) : 10;
  const int connections = argc > 2 ? std::atoi(argv[2]) : 2;
  const std::filesystem::path base = std::filesystem::path(OPTKIT_SOURCE_DIR) / "testdata/models/tiny-base";
  const serve::ServeOptions defaults;

  http::ServerOptions http_options;
  http_options.max_body_bytes = defaults.max_body_bytes;
  http_options.bulk_body_bytes = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : defaults.bulk_body_bytes;
  const bool idle_attacker = argc > 4 ? std::string(argv[4]) != "normal" : true;
  const std::string only_kind = argc > 5 ? argv[5] : "";
  test::MockServing serving(base, http_options);
  const int port = serving.port();

  std::vector<Phase> phases{measure(port, phase_seconds, connections, nullptr, idle_attacker)};
  for (const auto& hostile : hostile_bodies(defaults.max_body_bytes))
    if (only_kind.empty() || hostile.kind == only_kind)
      phases.push_back(measure(port, phase_seconds, connections, &hostile, idle_attacker));

  fmt::print("victim completion latency, one request every 5 ms for {:.0f} s per phase; {} hostile connections at {} "
             "priority; {} hardware threads\n",
             phase_seconds, connections, idle_attacker ? "SCHED_IDLE" : "normal", std::thread::hardware_concurrency());
  fmt::print("  {:<12} {:>9} {:>9} {:>9} {:>9} {:>12} {:>15}\n", "hostile", "requests", "p50 ms", "p99 ms", "max ms",
             "p99 / idle", "hostile bodies");
  for (const auto& p : phases)
    fmt::print("  {:<12} {:>9} {:>9.2f} {:>9.2f} {:>9.2f} {:>12.2f} {:>15}\n", p.name, p.requests, p.p50_ms, p.p99_ms,
               p.max_ms, p.p99_ms / phases.front().p99_ms, p.hostile_sent);
  return 0;
}
