#include "bench/slo.hpp"

#include "core/error.hpp"

#include <doctest/doctest.h>

using namespace optkit::bench;

TEST_CASE("SLOs parse as users write them") {
  const auto ttft = parse_slo("ttft:p95<=500ms");
  CHECK(ttft.metric == LatencyMetric::ttft);
  CHECK(ttft.percentile == 95);
  CHECK(ttft.threshold_s == doctest::Approx(0.5));
  CHECK_FALSE(ttft.strict);
  CHECK(ttft.passes(0.5));
  CHECK_FALSE(ttft.passes(0.501));

  const auto e2e = parse_slo("e2e:p99.9<2s+5%");
  CHECK(e2e.percentile == doctest::Approx(99.9));
  CHECK(e2e.strict);
  CHECK(e2e.margin == doctest::Approx(0.05));
  CHECK(e2e.passes(2.09)); // within the margin
  CHECK_FALSE(e2e.passes(2.1));

  const auto tpot = parse_slo("tpot:mean<=800us");
  CHECK(tpot.is_mean());
  CHECK(tpot.threshold_s == doctest::Approx(0.0008));
  CHECK(tpot.statistic_name() == "mean");
  CHECK(parse_slo("itl:p50<=25").threshold_s == doctest::Approx(0.025)); // bare numbers are ms
}

TEST_CASE("a malformed SLO is refused with the text and the accepted form") {
  for (const char* bad : {"ttft", "latency:p95<=1s", "ttft:p100<=1s", "ttft:q95<=1s", "ttft:p95>=1s",
                          "ttft:p95<=", "ttft:p95<=-3ms", "ttft:p95<=1s+5", "ttft:p95<=fast", "ttft:p95<=0ms"}) {
    CAPTURE(bad);
    try {
      (void)parse_slo(bad);
      FAIL("accepted");
    } catch (const optkit::InputError& e) {
      CHECK(std::string(e.what()).find(std::string("'") + bad + "'") != std::string::npos);
      CHECK(std::string(e.what()).find("METRIC:STAT<=VALUE") != std::string::npos);
    }
  }
}

TEST_CASE("durations") {
  CHECK(*parse_duration_seconds("1.5s") == doctest::Approx(1.5));
  CHECK(*parse_duration_seconds("250ms") == doctest::Approx(0.25));
  CHECK_FALSE(parse_duration_seconds("s").has_value());
  CHECK_FALSE(parse_duration_seconds("1e999s").has_value());
}
