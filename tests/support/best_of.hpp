// The benchmarks' timing rule: the best wall time of `repeats` runs of `work`, in milliseconds;
// and for works compared side by side, their times round by round.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <vector>

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

// Several works timed in turn, round after round, so that a slow spell of a shared machine falls
// on all of them alike: each round's wall time of each work, in milliseconds.
struct InterleavedTimes {
  std::vector<std::vector<double>> rounds; // [round][work]

  // Each work's best time over the rounds.
  double best(std::size_t work) const {
    double out = 1e300;
    for (const auto& round : rounds)
      out = std::min(out, round[work]);
    return out;
  }

  // The median over the rounds of work a's time over work b's in the same round.
  double median_ratio(std::size_t a, std::size_t b) const {
    std::vector<double> ratios;
    for (const auto& round : rounds)
      ratios.push_back(round[a] / round[b]);
    std::sort(ratios.begin(), ratios.end());
    const std::size_t n = ratios.size();
    return n == 0 ? 0.0 : n % 2 ? ratios[n / 2] : 0.5 * (ratios[n / 2 - 1] + ratios[n / 2]);
  }
};

inline InterleavedTimes
interleaved_ms(int repeats, const std::vector<std::function<void()>>& works) {
  InterleavedTimes out;
  for (int r = 0; r < repeats; ++r) {
    auto& round = out.rounds.emplace_back();
    for (const auto& work : works) {
      const auto t0 = std::chrono::steady_clock::now();
      work();
      round.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  return out;
}

} // namespace optkit::test
