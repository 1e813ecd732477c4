// Soak (issue 39's goal): `optkit serve-deltas --mock` holds 1,000 concurrent streaming clients for
// 5 minutes with flat memory. The real binary runs as a child; one I/O thread of http::AsyncClient
// keeps `clients` streams open at once, each connection's next request sent as its last one ends.
// Every 10 s it prints the server's resident bytes (VmRSS from /proc) and the streams completed;
// at the end, the last minute's peak against the first minute's, and the failures.
//   perf_serve_soak [seconds, default 300] [clients, default 1000] [mock step ms, default 2]
#include "http/async_client.hpp"
#include "http/client.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

using namespace optkit;
using SteadyClock = std::chrono::steady_clock;

namespace {

const std::string kBody = R"({"prompt": "Hello there", "max_tokens": 32, "stream": true, "ignore_eos": true})";

// A port free at the moment of asking (the server binds it a moment later).
int
free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), length);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// Both ends hold one descriptor per client: raise the soft limit to the hard one (children inherit).
void
raise_descriptor_limit() {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

pid_t
start_server(int port, double mock_step_ms) {
  const std::string base = std::string(OPTKIT_SOURCE_DIR) + "/testdata/models/tiny-base";
  std::vector<std::string> args = {OPTKIT_PERF_BINARY,
                                   "serve-deltas",
                                   "--base",
                                   base,
                                   "--mock",
                                   "--mock-step-ms",
                                   fmt::format("{}", mock_step_ms),
                                   "--port",
                                   std::to_string(port)};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) {
    fmt::print(stderr, "perf_serve_soak: cannot start {}\n", argv[0]);
    std::exit(1);
  }
  return pid;
}

std::int64_t
resident_bytes(pid_t pid) {
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmRSS:"))
      return std::atoll(line.c_str() + 6) * 1024;
  return -1;
}

bool
wait_for_health(int port) {
  http::ClientOptions options;
  options.connect_timeout = std::chrono::milliseconds(500);
  for (int attempt = 0; attempt < 300; ++attempt) {
    try {
      http::Client client(http::parse_url("http://127.0.0.1:" + std::to_string(port)), options);
      if (client.request("GET", "/health").status == 200)
        return true;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

} // namespace

int
main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 300;
  const int clients = argc > 2 ? std::atoi(argv[2]) : 1000;
  const double mock_step_ms = argc > 3 ? std::atof(argv[3]) : 2;
  raise_descriptor_limit();
  const int port = free_port();
  const pid_t server = start_server(port, mock_step_ms);
  if (!wait_for_health(port)) {
    fmt::print(stderr, "perf_serve_soak: the server did not answer /health\n");
    ::kill(server, SIGKILL);
    return 1;
  }

  http::AsyncClientOptions options;
  options.max_connections = static_cast<std::size_t>(clients);
  options.max_opening = 64;
  http::AsyncClient client(http::parse_url("http://127.0.0.1:" + std::to_string(port)), options);
  std::atomic<long> completed{0}, failed{0};
  std::atomic<bool> stopping{false};
  std::function<void()> start_one = [&] {
    auto body = std::make_shared<std::string>();
    client.submit({"POST", "/v1/completions", kBody, "application/json"},
                  {nullptr,
                   [body](std::string_view piece) {
                     *body += piece;
                     return true;
                   },
                   [&, body](http::AsyncResult r) {
                     if (r.status == 200 && r.error.empty() && body->ends_with("data: [DONE]\n\n"))
                       ++completed;
                     else
                       ++failed;
                     if (!stopping)
                       start_one();
                   }});
  };
  for (int c = 0; c < clients; ++c)
    start_one();

  fmt::print("serve-deltas --mock (step {} ms), {} concurrent streaming clients, {:.0f} s\n", mock_step_ms, clients,
             seconds);
  fmt::print("  {:>6} {:>12} {:>12} {:>8} {:>10}\n", "s", "server RSS", "completed", "failed", "in flight");
  const auto started = SteadyClock::now();
  std::vector<std::pair<double, std::int64_t>> samples;
  while (true) {
    std::this_thread::sleep_for(std::chrono::seconds(10));
    const double at = std::chrono::duration<double>(SteadyClock::now() - started).count();
    const auto rss = resident_bytes(server);
    samples.emplace_back(at, rss);
    fmt::print("  {:>6.0f} {:>9.1f} MiB {:>12} {:>8} {:>10}\n", at, double(rss) / (1 << 20), completed.load(),
               failed.load(), client.in_flight());
    if (at >= seconds || rss < 0)
      break;
  }
  stopping = true;
  while (client.in_flight() > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ::kill(server, SIGTERM);
  int status = 0;
  ::waitpid(server, &status, 0);

  const auto peak_between = [&](double from, double to) {
    std::int64_t peak = 0;
    for (const auto& [at, rss] : samples)
      if (at >= from && at <= to)
        peak = std::max(peak, rss);
    return peak;
  };
  const std::int64_t first = peak_between(0, 60), last = peak_between(seconds - 60, seconds + 60);
  fmt::print("peak RSS, first minute {:.1f} MiB, last minute {:.1f} MiB: ratio {:.3f}; {} streams completed, {} "
             "failed; server exit status {}\n",
             double(first) / (1 << 20), double(last) / (1 << 20),
             double(last) / double(std::max<std::int64_t>(1, first)), completed.load(), failed.load(),
             WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
  return failed.load() == 0 ? 0 : 1;
}
