// Certification accuracy against a live server whose capacity is known by construction
// (tests/support/scripted_server.hpp: c worker threads, each request k tokens × s per token, so
// at most c / (k·s) requests per second), through the real load generator and HTTP stack, with
// bench's defaults: each open-loop trial after the server has drained (a probe at the gate's
// latency) and ended once its SLO is lost. Prints each trial and the certified rate as a fraction
// of the limit (the goal: within 5 % below it, never above, in ≤ 12 trials). With `hog` threads
// the server also spins that many threads whenever requests wait for a slot: overloaded, it
// saturates the machine the generator runs on.
//   perf_bench_certify [slots = 8] [tokens = 10] [step ms = 5] [SLO = e2e:p95<=1s] [hog = 0]
#include "bench/arrivals.hpp"
#include "bench/bench_report.hpp"
#include "bench/certification.hpp"
#include "bench/load_generator.hpp"
#include "bench/saturation_stop.hpp"
#include "bench/server_settle.hpp"
#include "support/perf_args.hpp"
#include "support/scripted_server.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace optkit;
using namespace optkit::bench;

namespace {

class ServerRunner final : public TrialRunner {
public:
  ServerRunner(const http::Url& url, int tokens, const SummaryOptions& summary)
      : m_generator({url})
      , m_request({{nlohmann::json{{"prompt", "ok"}, {"max_tokens", tokens}, {"stream", true}}.dump(), 3, tokens}})
      , m_summary(summary) {}
  TrialRecording closed_loop(std::size_t count, int concurrency) override {
    return m_generator.closed_loop(m_request, count, concurrency);
  }
  SettleReport settle(double probe_limit_s, double timeout_s) override {
    return settle_server(m_generator, m_request.front(), probe_limit_s, timeout_s);
  }
  TrialRecording open_loop(double rate, std::size_t count, std::uint64_t seed) override {
    const auto offsets = arrival_offsets({ArrivalProcess::poisson, rate, 1, seed}, count);
    const auto window = measurement_window(offsets, m_summary.warmup_fraction, m_summary.cooldown_fraction);
    return m_generator.open_loop(m_request, offsets, [&](std::span<const RequestProgress> sent, double now) {
      return slo_already_lost(m_summary.slos, sent, now, window);
    });
  }

private:
  LoadGenerator m_generator;
  std::vector<PreparedRequest> m_request;
  SummaryOptions m_summary;
};

} // namespace

int
main(int argc, char** argv) {
  constexpr std::string_view kUsage =
      "perf_bench_certify [slots = 8] [tokens = 10] [step ms = 5] [SLO = e2e:p95<=1s] [hog = 0]";
  const int slots = test::positional_number(argc, argv, 1, "slots", 8, 1, kUsage);
  const int tokens = test::positional_number(argc, argv, 2, "tokens", 10, 1, kUsage);
  const double step_ms = test::positional_number(argc, argv, 3, "step ms", 5.0, 0.001, kUsage);
  const std::string slo = argc > 4 ? argv[4] : "e2e:p95<=1s";
  const int hog = test::positional_number(argc, argv, 5, "hog", 0, 0, kUsage);
  const double limit = slots / (tokens * step_ms / 1e3);
  test::ScriptedServer server(slots, std::chrono::microseconds(static_cast<long>(step_ms * 1e3)), hog);
  CertifyOptions options;
  options.summary.slos = {parse_slo(slo)};
  ServerRunner runner(server.url(), tokens, options.summary);
  const auto c = certify(runner, options, [](const TrialResult& t) { std::printf("%s\n", progress_line(t).c_str()); });
  int open_loop = 0;
  for (const auto& t : c.trials)
    open_loop += t.phase == TrialPhase::gate ? 0 : 1;
  std::printf("limit by construction %.2f req/s; %s %.2f req/s = %.3f of the limit; lowest failing %.2f; %d open-loop "
              "trials; %s; %d hog threads\n",
              limit, to_string(c.status).c_str(), c.certified_rate, c.certified_rate / limit, c.lowest_failing,
              open_loop, c.stop_reason.c_str(), hog);
  return 0;
}
