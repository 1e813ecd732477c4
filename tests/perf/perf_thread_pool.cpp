// The CPU thread pool when it has more threads than the process has CPUs (`--threads 8` on a
// 2-core box, or a default count taken from the machine inside a Slurm job's cpuset), side by
// side in one run with a pool of exactly as many threads as CPUs. The work is decode-shaped: many
// short loops (a layer issues ~10 per step), each a few tens of microseconds of arithmetic.
//   loops/s at threads = CPUs (the baseline), 2× and 4× CPUs, and each one's ratio to the baseline.
// Usage: perf_thread_pool [loops, default 4000] [items per loop, default 4096]
#include "core/available_cpus.hpp"
#include "core/thread_pool.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <vector>

using namespace optkit;

namespace {

double
loops_per_second(unsigned threads, int loops, std::int64_t items) {
  ThreadPool pool(threads);
  std::vector<float> data(static_cast<std::size_t>(items), 1.0f);
  volatile float sink = 0;
  const auto body = [&](std::int64_t a, std::int64_t b) {
    float sum = 0;
    for (std::int64_t i = a; i < b; ++i)
      for (int k = 0; k < 16; ++k)
        sum += std::sqrt(data[static_cast<std::size_t>(i)] + static_cast<float>(k));
    sink = sink + sum;
  };
  for (int i = 0; i < 50; ++i) // warm-up
    pool.parallel_for(items, body);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < loops; ++i)
    pool.parallel_for(items, body);
  return loops / std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace

int
main(int argc, char** argv) {
  const int loops = argc > 1 ? std::atoi(argv[1]) : 4000;
  const std::int64_t items = argc > 2 ? std::atoll(argv[2]) : 4096;
  const unsigned cpus = available_cpus();
  fmt::print("{} CPUs available to this process; {} loops of {} items each\n", cpus, loops, items);
  // Alternated twice, best of each, so a noisy neighbour does not decide the ratios.
  double best[3] = {0, 0, 0};
  const unsigned sizes[3] = {cpus, 2 * cpus, 4 * cpus};
  for (int round = 0; round < 2; ++round)
    for (int s = 0; s < 3; ++s)
      best[s] = std::max(best[s], loops_per_second(sizes[s], loops, items));
  for (int s = 0; s < 3; ++s)
    fmt::print("pool of {:>3} threads  {:>9.0f} loops/s  {:.2f}x the pool of {}\n", sizes[s], best[s],
               best[s] / best[0], cpus);
  return 0;
}
