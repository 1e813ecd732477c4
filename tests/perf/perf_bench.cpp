// bench's load generator against a loopback no-op endpoint: the highest open-loop rate it holds
// with p99 dispatch lag ≤ 1 ms (the goal: ≥ 20,000 req/s on this 2-core machine; the
// GuideLLM maintainer's own figure for GuideLLM is about 1,000 req/s, reference note §1.7).
// The endpoint shares the machine with the generator, as `optkit bench --calibrate` does.
//   perf_bench [seconds per step = 2] [max rate = 64000] [first rate = 1000]
#include "bench/calibration.hpp"

#include <cstdio>
#include <cstdlib>

int
main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  const double max_rate = argc > 2 ? std::atof(argv[2]) : 64000.0;
  const double first_rate = argc > 3 ? std::atof(argv[3]) : 1000.0;
  const auto c = optkit::bench::calibrate_generator(first_rate, max_rate, seconds, 0.001);
  std::printf("%10s %10s %12s %12s %12s %12s %7s %5s\n", "target/s", "requests", "achieved/s", "lag p50 us",
              "lag p99 us", "lag max us", "errors", "held");
  for (const auto& s : c.steps)
    std::printf("%10.0f %10zu %12.0f %12.1f %12.1f %12.1f %7zu %5s\n", s.target_rate, s.requests, s.achieved_rate,
                s.lag_p50_s * 1e6, s.lag_p99_s * 1e6, s.lag_max_s * 1e6, s.errors, s.held ? "yes" : "no");
  std::printf("max sustained open-loop rate with p99 dispatch lag <= 1 ms: %.0f req/s (%.1fx GuideLLM's ~1000)\n",
              c.max_sustained_rate, c.max_sustained_rate / 1000.0);
  return 0;
}
