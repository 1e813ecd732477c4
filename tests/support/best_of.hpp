// The benchmarks' timing rule: the best wall time of `repeats` runs of `work`, in milliseconds.
#pragma once

#include <algorithm>
#include <chrono>

namespace optkit::test {

template <class Work>
double
best_ms(int repeats, Work&& work) {
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    work();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

} // namespace optkit::test
