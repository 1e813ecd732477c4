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
// The attacker runs in a process of its own, on the server's cores. A remote attacker spends another
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
#include <sys/wait.h>
#include <unistd.h>

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

// Sends `body` on `connections` keep-alive connections, each as fast as the server answers, for
// `seconds`; returns the bodies sent.
long
attack(int port, const std::string& body, int connections, double seconds, bool idle) {
  const auto deadline = SteadyClock::now() + std::chrono::duration<double>(seconds);
  std::atomic<long> sent{0};
  std::vector<std::thread> attackers;
  for (int c = 0; c < connections; ++c)
    attackers.emplace_back([&] {
      if (idle)
        run_at_idle_priority();
      http::ClientOptions options;
      options.request_timeout = std::chrono::seconds(120);
      while (SteadyClock::now() < deadline) {
        try { // the server may close the connection after refusing a body: a new client then
          http::Client client(http::parse_url("http://127.0.0.1:" + std::to_string(port)), options);
          while (SteadyClock::now() < deadline) {
            client.request("POST", "/v1/completions", body);
            ++sent;
          }
        } catch (const std::exception&) {
          ++sent;
        }
      }
    });
  for (auto& t : attackers)
    t.join();
  return sent.load();
}

struct AttackOrder {
  int kind = -1; // an index into the hostile bodies; -1: exit
  int port = 0;
  int connections = 0;
  bool idle = true;
  double seconds = 0;
};

// The attacker in a process of its own, forked before the server starts: the faults and unmaps of
// its 32 MiB request buffers happen under its own memory map's lock, as a remote attacker's do, and
// the victim's latency measures what the server's process and the kernel do with the bytes.
class AttackerProcess {
public:
  explicit AttackerProcess(const std::vector<HostileBody>& bodies) {
    if (::pipe(m_orders) != 0 || ::pipe(m_results) != 0)
      throw std::runtime_error("perf_serve_hostile: pipe failed");
    m_pid = ::fork();
    if (m_pid < 0)
      throw std::runtime_error("perf_serve_hostile: fork failed");
    if (m_pid == 0) {
      for (AttackOrder order; ::read(m_orders[0], &order, sizeof order) == sizeof order && order.kind >= 0;) {
        const long sent = attack(order.port, bodies[static_cast<std::size_t>(order.kind)].body, order.connections,
                                 order.seconds, order.idle);
        if (::write(m_results[1], &sent, sizeof sent) != sizeof sent)
          break;
      }
      std::_Exit(0);
    }
  }
  ~AttackerProcess() {
    start({});
    ::waitpid(m_pid, nullptr, 0);
  }
  AttackerProcess(const AttackerProcess&) = delete;
  AttackerProcess& operator=(const AttackerProcess&) = delete;

  void start(const AttackOrder& order) {
    if (::write(m_orders[1], &order, sizeof order) != sizeof order)
      throw std::runtime_error("perf_serve_hostile: the attacker process is gone");
  }
  long finish() { // the bodies the attack sent, once it ends
    long sent = 0;
    if (::read(m_results[0], &sent, sizeof sent) != sizeof sent)
      throw std::runtime_error("perf_serve_hostile: the attacker process is gone");
    return sent;
  }

private:
  int m_orders[2] = {-1, -1}, m_results[2] = {-1, -1};
  pid_t m_pid = -1;
};

// One phase: the victim's latencies with the attacker sending hostile body `kind` (-1: none).
Phase
measure(int port, double phase_seconds, AttackerProcess& attacker, AttackOrder order, const std::string& name) {
  const double settle = 0.2; // the attack is under way before the victim starts
  if (order.kind >= 0) {
    order.port = port;
    order.seconds = phase_seconds + settle;
    attacker.start(order);
    std::this_thread::sleep_for(std::chrono::duration<double>(settle));
  }
  auto seconds = victim_latencies(port, phase_seconds);
  const long sent = order.kind >= 0 ? attacker.finish() : 0;
  std::sort(seconds.begin(), seconds.end());
  return {name,
          seconds.size(),
          1e3 * percentile_of_sorted(seconds, 50),
          1e3 * percentile_of_sorted(seconds, 99),
          1e3 * seconds.back(),
          sent};
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
  const auto bodies = hostile_bodies(defaults.max_body_bytes);
  AttackerProcess attacker(bodies); // before the server's threads exist
  test::MockServing serving(base, http_options);
  const int port = serving.port();

  std::vector<Phase> phases{measure(port, phase_seconds, attacker, {}, "idle")};
  for (std::size_t k = 0; k < bodies.size(); ++k)
    if (only_kind.empty() || bodies[k].kind == only_kind)
      phases.push_back(measure(port, phase_seconds, attacker,
                               {.kind = static_cast<int>(k), .connections = connections, .idle = idle_attacker},
                               bodies[k].kind));

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
