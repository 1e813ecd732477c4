#include "bench/server_settle.hpp"

#include "bench/server_queue.hpp"
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "http/client.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

namespace optkit::bench {

namespace {

using Clock = std::chrono::steady_clock;

// The server's queue from its /metrics (at the endpoint's root), or nothing when it has none.
std::optional<ServerQueue>
read_server_queue(http::Client& client) {
  try {
    const auto response = client.request("GET", "/metrics");
    return response.status == 200 ? parse_server_queue(response.body) : std::nullopt;
  } catch (const RuntimeFailure&) { // no /metrics to read: the probe alone decides
    return std::nullopt;
  }
}

// Whether the probe, sent alone, came back within `limit_s`; its latency goes to `report`. It is
// given up after `budget_s` (the wait left), so a wedged server cannot hold the wait past its cap.
bool
probe_answers(const LoadGenerator& generator, const PreparedRequest& probe, double limit_s, double budget_s,
              SettleReport& report) {
  auto options = generator.options();
  options.request_timeout_s = std::min(std::max(budget_s, 1.0), options.request_timeout_s);
  const auto recording = LoadGenerator(options).closed_loop({probe}, 1, 1);
  ++report.probes;
  if (recording.requests.empty())
    return false;
  const auto& r = recording.requests.front();
  report.probe_e2e_s = r.e2e();
  return r.ok() && r.e2e() <= limit_s;
}

} // namespace

SettleReport
settle_server(const LoadGenerator& generator, const PreparedRequest& probe, double probe_limit_s, double timeout_s) {
  constexpr auto kPause = std::chrono::milliseconds(250);
  SettleReport report;
  report.checked = true;
  report.drained = false;
  auto root = generator.options().endpoint;
  root.prefix.clear(); // /metrics sits at the server's root, beside /v1
  http::ClientOptions client_options;
  client_options.headers = generator.options().headers;
  client_options.request_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(
      1000 * std::clamp(std::min(timeout_s, generator.options().request_timeout_s), 1.0, 60.0)));
  http::Client metrics(root, client_options);
  const auto start = Clock::now();
  const auto waited = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  bool first_look = true;
  for (;;) {
    const auto queue = read_server_queue(metrics);
    report.running_at_start = queue ? std::optional(queue->running) : std::nullopt;
    report.waiting_at_start = queue ? std::optional(queue->waiting) : std::nullopt;
    if (first_look) {
      report.running_left = report.running_at_start;
      report.waiting_left = report.waiting_at_start;
      first_look = false;
    }
    const bool idle = !queue || queue->running + queue->waiting == 0;
    if (idle && probe_answers(generator, probe, probe_limit_s, timeout_s - waited(), report)) {
      report.drained = true;
      break;
    }
    if (waited() >= timeout_s || interrupt_requested())
      break;
    std::this_thread::sleep_for(kPause);
  }
  report.waited_s = waited();
  return report;
}

} // namespace optkit::bench
