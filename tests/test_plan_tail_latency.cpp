// plan's percentile SLAs: the simulator serving a planned row under Poisson arrivals. Pinned
// against M/D/1, where a worker serves one request at a time in a fixed time S: the waiting time's
// distribution is Erlang's closed form, P(W <= t) = (1 - ρ) Σ_{k=0}^{⌊t/S⌋} (λ(kS - t))^k / k! ·
// e^{-λ(kS - t)}, with ρ = λS, and its mean is ρS / (2(1 - ρ)).
#include "core/error.hpp"
#include "plan/tail_latency.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace optkit;
using namespace optkit::plan;

namespace {

constexpr double kService = 0.1; // seconds per request

double
md1_wait_cdf(double t, double rate) {
  double sum = 0;
  for (int k = 0; k <= int(std::floor(t / kService)); ++k) {
    const double x = rate * (k * kService - t);
    sum += std::pow(x, k) / std::tgamma(k + 1.0) * std::exp(-x);
  }
  return (1 - rate * kService) * sum;
}

// The q-quantile of the time in the system (wait + service), ms.
double
md1_sojourn_quantile_ms(double q, double rate) {
  double lo = 0, hi = 10;
  for (int i = 0; i < 80; ++i) {
    const double mid = (lo + hi) / 2;
    (md1_wait_cdf(mid, rate) < q ? lo : hi) = mid;
  }
  return (lo + kService) * 1000.0;
}

// A static worker of batch 1 answering one-token requests: each request is one prefill step of
// kService seconds, so the worker is an M/D/1 queue.
struct Md1Case {
  PlanRequest request;
  PlanRow row;
  RowStepCosts costs;

  Md1Case() {
    request.workload = {100, 1, 0};
    row.mode = ServingMode::static_batching;
    row.batch = 1;
    row.replicas = 1;
    row.unit_gpus = 1;
    row.requests_per_s = 1 / kService; // the mean model's rate: the worker always busy
    row.ttft_ms = kService * 1000;
    costs.worker = [](const sim::SimStep& step) {
      REQUIRE(step.prefills.size() == 1);
      return kService;
    };
  }
};

TailOptions
options_with(const std::vector<std::string>& slos, int requests = 20000) {
  TailOptions options;
  options.slos = plan_slos(slos);
  options.requests = requests;
  return options;
}

} // namespace

TEST_CASE("a batch-1 worker of fixed service time is M/D/1: the simulated percentiles are Erlang's") {
  const Md1Case md1;
  const double rate = 6; // ρ = 0.6
  const TailLatencies tail = simulate_row(md1.request, md1.row, md1.costs, rate, options_with({}));
  const double mean_ms = (kService + rate * kService * kService / (2 * (1 - rate * kService))) * 1000;
  CHECK(mean_ms == doctest::Approx(175.0));
  CHECK(tail.e2e.mean == doctest::Approx(mean_ms).epsilon(0.04));
  CHECK(tail.e2e.p50 == doctest::Approx(md1_sojourn_quantile_ms(0.50, rate)).epsilon(0.05)); // 137 ms
  CHECK(tail.e2e.p95 == doctest::Approx(md1_sojourn_quantile_ms(0.95, rate)).epsilon(0.05)); // 383 ms
  CHECK(tail.e2e.p99 == doctest::Approx(md1_sojourn_quantile_ms(0.99, rate)).epsilon(0.08)); // 553 ms
  // One-token requests: the first token is the last.
  CHECK(tail.ttft.p95 == tail.e2e.p95);
  CHECK(tail.tpot.p95 == 0);
}

TEST_CASE("where the mean SLA holds but queueing breaks the p95, the row is dropped") {
  const Md1Case md1;
  // At 6 requests/s the mean request latency is 175 ms, within a 300 ms bound, and the mean
  // model (no queueing) says 100 ms; but one request in twenty waits past 283 ms.
  const TailLatencies mean = simulate_row(md1.request, md1.row, md1.costs, 6, options_with({"e2e:mean<=300ms"}));
  CHECK(mean.meets());
  const TailLatencies p95 = simulate_row(md1.request, md1.row, md1.costs, 6, options_with({"e2e:p95<=300ms"}));
  REQUIRE_FALSE(p95.meets());
  CHECK(p95.misses.front().find("e2e p95 3") == 0);
  CHECK(p95.misses.front().find("> 300 ms") != std::string::npos);

  // The highest rate whose p95 holds is where Erlang's p95 sojourn is 300 ms.
  double lo = 0.1, hi = 9.9;
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2;
    (md1_sojourn_quantile_ms(0.95, mid) <= 300 ? lo : hi) = mid;
  }
  TailOptions options = options_with({"e2e:p95<=300ms"}, 8000);
  options.rate = 6;
  const RowTail tail = row_tail(md1.request, md1.row, 0, md1.costs, options);
  REQUIRE(tail.at_rate);
  CHECK_FALSE(tail.at_rate->meets());
  REQUIRE(tail.at_capacity.meets());
  CHECK(tail.at_capacity.rate == doctest::Approx(lo).epsilon(0.06)); // ≈ 5.0 requests/s
  CHECK(tail.at_capacity.e2e.p95 <= 300);
  CHECK_FALSE(tail.capacity_is_lower_bound);
  CHECK(tail.tokens_per_s_per_gpu == doctest::Approx(tail.at_capacity.rate * 1));
}

TEST_CASE("replicas share the arrivals: two replicas at twice the rate queue as one") {
  Md1Case one, two;
  two.row.replicas = 2;
  const TailLatencies a = simulate_row(one.request, one.row, one.costs, 5, options_with({}, 4000));
  const TailLatencies b = simulate_row(two.request, two.row, two.costs, 10, options_with({}, 4000));
  CHECK(a.e2e.p95 == b.e2e.p95);
}

TEST_CASE("plan's SLOs bound ttft, tpot and e2e") {
  CHECK(plan_slos({"ttft:p99<=2s", "tpot:p95<=30ms", "e2e:mean<=10s"}).size() == 3);
  CHECK_THROWS_WITH_AS(plan_slos({"itl:p95<=30ms"}), doctest::Contains("use tpot"), InputError);
  CHECK_THROWS_AS(plan_slos({"e2e:p95<=soon"}), InputError);
}
