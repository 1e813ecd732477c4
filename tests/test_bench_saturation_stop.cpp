// The over-saturation stop: when an open-loop trial can no longer pass its SLOs (the rule itself
// on hand-made progress, then the load generator ending a trial against an overloaded scripted
// server while a trial the server keeps up with runs to its end). Nothing asserts a speed.
#include "bench/load_generator.hpp"
#include "bench/saturation_stop.hpp"
#include "bench/trial_summary.hpp"
#include "support/scripted_server.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace optkit;
using namespace optkit::bench;
using namespace std::chrono_literals;

TEST_CASE("the measurement window is summarize_trial's: warmup and cooldown shares of the schedule") {
  std::vector<double> offsets;
  for (int i = 0; i <= 100; ++i)
    offsets.push_back(i * 0.1); // 0 .. 10 s
  const auto w = measurement_window(offsets, 0.1, 0.2);
  CHECK(w.start == doctest::Approx(1.0));
  CHECK(w.end == doctest::Approx(8.0));
  CHECK(w.planned == 71); // 1.0, 1.1, ..., 8.0
  CHECK(measurement_window({}, 0.1, 0.1).planned == 0);
}

TEST_CASE("an SLO is lost once more measured requests are certain to exceed it than its percentile allows") {
  const std::vector<SloRule> slos = {parse_slo("e2e:p90<=1s")};
  const MeasurementWindow window{10, 20, 100}; // p90 of 100 allows 10 (+1 for interpolation) over
  std::vector<RequestProgress> sent;
  for (int i = 0; i < 12; ++i)
    sent.push_back({10.0 + i * 0.1, -1, -1});                 // in flight
  CHECK(slo_already_lost(slos, sent, 10.5, window).empty());  // none waited past 1 s yet
  const auto lost = slo_already_lost(slos, sent, 13, window); // all 12 have
  CHECK(lost.find("SLO e2e:p90<=1s lost: 12 of the 100 measured requests") == 0);
  // Done ones count by their own latency; warmup requests (before the window) do not count.
  for (auto& r : sent)
    r.end = r.intended + 0.5;
  CHECK(slo_already_lost(slos, sent, 13, window).empty());
  std::vector<RequestProgress> warmup(30, RequestProgress{5, -1, -1});
  CHECK(slo_already_lost(slos, warmup, 13, window).empty());
  // TTFT counts the requests whose first token is late, arrived or not; a mean rule never stops.
  std::vector<RequestProgress> slow_start(12, RequestProgress{10, 12, -1});
  CHECK_FALSE(slo_already_lost({parse_slo("ttft:p90<=1s")}, slow_start, 12.5, window).empty());
  CHECK(slo_already_lost({parse_slo("ttft:mean<=1s"), parse_slo("tpot:p90<=1ms")}, slow_start, 12.5, window).empty());
  // A margin widens the threshold.
  CHECK(slo_already_lost({parse_slo("e2e:p90<=1s+100%")}, slow_start, 11.5, window).empty());
}

TEST_CASE("the generator ends a trial an overloaded server cannot pass, and runs one it keeps up with to the end") {
  const std::vector<SloRule> slos = {parse_slo("e2e:p90<=300ms")};
  const auto request = nlohmann::json{{"prompt", "ok"}, {"max_tokens", 20}, {"stream", true}}.dump();
  std::vector<double> offsets;
  for (int i = 0; i < 400; ++i)
    offsets.push_back(i * 0.01); // 100 req/s for 4 s
  const auto window = measurement_window(offsets, 0.1, 0.1);
  const GiveUp give_up = [&](std::span<const RequestProgress> sent, double now) {
    return slo_already_lost(slos, sent, now, window);
  };
  {
    test::ScriptedServer slow(1, 10ms); // 200 ms a request: 5 req/s
    LoadGenerator generator({slow.url()});
    const auto recording = generator.open_loop({{request, 3, 20}}, offsets, give_up);
    CHECK(recording.stopped_early.find("SLO e2e:p90<=300ms lost") == 0);
    CHECK(recording.requests.size() < offsets.size()); // the rest of the schedule was not sent
    SummaryOptions summary;
    summary.slos = slos;
    CHECK(summarize_trial(recording, summary).failure.find("stopped early: SLO e2e:p90<=300ms lost") == 0);
  }
  {
    test::ScriptedServer fast(8, 100us); // 2 ms a request: 4,000 req/s
    LoadGenerator generator({fast.url()});
    const auto recording = generator.open_loop({{request, 3, 20}}, offsets, give_up);
    CHECK(recording.stopped_early.empty());
    CHECK(recording.requests.size() == offsets.size());
  }
}
