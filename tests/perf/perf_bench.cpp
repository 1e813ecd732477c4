// bench's load generator against a loopback no-op endpoint: the highest open-loop rate it holds
// with p99 dispatch lag ≤ 1 ms (the goal: ≥ 20,000 req/s on this 2-core machine; the
// GuideLLM maintainer's own figure for GuideLLM is about 1,000 req/s, reference note §1.7).
// The endpoint shares the machine with the generator, as `optkit bench --calibrate` does.
// Then, side by side in one run, rounds at one fixed rate with the client opening at most 16
// connections at once (the default) and with no such bound (the behaviour before it): how many
// rounds each holds, and their worst p99 and maximum lag.
//   perf_bench [seconds per step = 2] [max rate = 64000] [first rate = 1000] [A/B rate = 20000] [rounds = 5]
#include "bench/generator_ceiling.hpp"
#include "support/perf_args.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>

int
main(int argc, char** argv) {
  using namespace optkit::bench;
  constexpr std::string_view kUsage =
      "perf_bench [seconds per step = 2] [max rate = 64000] [first rate = 1000] [A/B rate = 20000] [rounds = 5]";
  const double seconds = optkit::test::positional_number(argc, argv, 1, "seconds per step", 2.0, 0.01, kUsage);
  const double max_rate = optkit::test::positional_number(argc, argv, 2, "max rate", 64000.0, 1.0, kUsage);
  const double first_rate = optkit::test::positional_number(argc, argv, 3, "first rate", 1000.0, 1.0, kUsage);
  const double ab_rate = optkit::test::positional_number(argc, argv, 4, "A/B rate", 20000.0, 1.0, kUsage);
  const int rounds = optkit::test::positional_number(argc, argv, 5, "rounds", 5, 1, kUsage);
  const auto c = measure_generator_ceiling(first_rate, max_rate, seconds, 0.001);
  std::printf("%10s %10s %12s %12s %12s %12s %7s %5s\n", "target/s", "requests", "achieved/s", "lag p50 us",
              "lag p99 us", "lag max us", "errors", "held");
  for (const auto& s : c.steps)
    std::printf("%10.0f %10zu %12.0f %12.1f %12.1f %12.1f %7zu %5s\n", s.target_rate, s.requests, s.achieved_rate,
                s.lag_p50_s * 1e6, s.lag_p99_s * 1e6, s.lag_max_s * 1e6, s.errors, s.held ? "yes" : "no");
  std::printf("max sustained open-loop rate with p99 dispatch lag <= 1 ms: %.0f req/s (%.1fx GuideLLM's ~1000)\n",
              c.max_sustained_rate, c.max_sustained_rate / 1000.0);

  const NoopEndpoint endpoint;
  struct Arm {
    const char* name;
    std::size_t max_opening;
    int held = 0;
    double worst_p99 = 0, worst_max = 0;
  };
  Arm arms[] = {{"opening <= 16", 16}, {"opening unbounded", std::numeric_limits<std::size_t>::max()}};
  for (int round = 0; round < rounds; ++round)
    for (auto& arm : arms) { // alternated, so both see the same machine
      auto options = endpoint.generator_options();
      options.max_opening = arm.max_opening;
      LoadGenerator generator(options);
      const auto step = measure_generator_step(generator, ab_rate, seconds, 0.001);
      arm.held += step.held ? 1 : 0;
      arm.worst_p99 = std::max(arm.worst_p99, step.lag_p99_s);
      arm.worst_max = std::max(arm.worst_max, step.lag_max_s);
    }
  std::printf("\n%.0f req/s for %.0f s, %d rounds each:\n", ab_rate, seconds, rounds);
  for (const auto& arm : arms)
    std::printf("  %-18s held %d of %d   worst p99 lag %10.1f us   worst max lag %10.1f us\n", arm.name, arm.held,
                rounds, arm.worst_p99 * 1e6, arm.worst_max * 1e6);
  return 0;
}
