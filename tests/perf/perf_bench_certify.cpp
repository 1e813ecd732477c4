// Certification accuracy against a live server whose capacity is known by construction
// (tests/support/scripted_server.hpp: c worker threads, each request k tokens × s per token, so
// at most c / (k·s) requests per second), through the real load generator and HTTP stack, with
// bench's defaults. Prints each trial and the certified rate as a fraction of the limit (the
// goal: within 5 % below it, never above, in ≤ 12 trials).
//   perf_bench_certify [slots = 8] [tokens = 10] [step ms = 5] [SLO = e2e:p95<=1s]
#include "bench/arrivals.hpp"
#include "bench/bench_report.hpp"
#include "bench/certification.hpp"
#include "bench/load_generator.hpp"
#include "support/scripted_server.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace optkit;
using namespace optkit::bench;

namespace {

class ServerRunner final : public TrialRunner {
public:
  ServerRunner(const http::Url& url, int tokens)
      : m_generator({url})
      , m_request({{nlohmann::json{{"prompt", "ok"}, {"max_tokens", tokens}, {"stream", true}}.dump(), 3, tokens}}) {}
  TrialRecording closed_loop(std::size_t count, int concurrency) override {
    return m_generator.closed_loop(m_request, count, concurrency);
  }
  TrialRecording open_loop(double rate, std::size_t count, std::uint64_t seed) override {
    return m_generator.open_loop(m_request, arrival_offsets({ArrivalProcess::poisson, rate, 1, seed}, count));
  }

private:
  LoadGenerator m_generator;
  std::vector<PreparedRequest> m_request;
};

} // namespace

int
main(int argc, char** argv) {
  const int slots = argc > 1 ? std::atoi(argv[1]) : 8;
  const int tokens = argc > 2 ? std::atoi(argv[2]) : 10;
  const double step_ms = argc > 3 ? std::atof(argv[3]) : 5.0;
  const std::string slo = argc > 4 ? argv[4] : "e2e:p95<=1s";
  const double limit = slots / (tokens * step_ms / 1e3);
  test::ScriptedServer server(slots, std::chrono::microseconds(static_cast<long>(step_ms * 1e3)));
  ServerRunner runner(server.url(), tokens);
  CertifyOptions options;
  options.summary.slos = {parse_slo(slo)};
  const auto c = certify(runner, options, [](const TrialResult& t) { std::printf("%s\n", progress_line(t).c_str()); });
  int open_loop = 0;
  for (const auto& t : c.trials)
    open_loop += t.phase == "gate" ? 0 : 1;
  std::printf("limit by construction %.2f req/s; %s %.2f req/s = %.3f of the limit; lowest failing %.2f; %d open-loop "
              "trials; %s\n",
              limit, to_string(c.status).c_str(), c.certified_rate, c.certified_rate / limit, c.lowest_failing,
              open_loop, c.stop_reason.c_str());
  return 0;
}
