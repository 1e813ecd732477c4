// The thread pool: every item of a loop runs once, an exception reaches the caller, several
// threads may run loops on one pool at once, and a loop inside a loop body does not deadlock.
#include "core/thread_pool.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace optkit;

namespace {

// Σ i over [0, count) computed by the pool, each item counted exactly once.
std::int64_t
pooled_sum(ThreadPool& pool, std::int64_t count, std::int64_t chunk) {
  std::atomic<std::int64_t> sum = 0;
  pool.parallel_for(
      count,
      [&](std::int64_t begin, std::int64_t end) {
        std::int64_t local = 0;
        for (std::int64_t i = begin; i < end; ++i)
          local += i;
        sum += local;
      },
      chunk);
  return sum;
}

} // namespace

TEST_CASE("each item runs once, split evenly or taken in chunks") {
  ThreadPool pool(3);
  CHECK(pool.size() == 3);
  for (std::int64_t count : {1, 2, 7, 1000})
    for (std::int64_t chunk : {0, 1, 16}) {
      CAPTURE(count);
      CAPTURE(chunk);
      CHECK(pooled_sum(pool, count, chunk) == count * (count - 1) / 2);
    }
  CHECK(pooled_sum(pool, 0, 0) == 0);
}

TEST_CASE("an exception in a body reaches the caller, and the pool keeps working") {
  ThreadPool pool(2);
  CHECK_THROWS_AS(pool.parallel_for(100,
                                    [](std::int64_t begin, std::int64_t) {
                                      if (begin >= 50)
                                        throw std::runtime_error("boom");
                                    }),
                  std::runtime_error);
  CHECK(pooled_sum(pool, 100, 0) == 4950);
}

TEST_CASE("several threads run loops on one pool at once, each getting its own answer") {
  ThreadPool pool(2);
  std::vector<std::thread> callers;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      for (int round = 0; round < 200; ++round) {
        const std::int64_t count = 100 + 37 * t + round;
        if (pooled_sum(pool, count, t % 2 == 0 ? 0 : 8) != count * (count - 1) / 2)
          ++wrong[std::size_t(t)];
      }
    });
  for (auto& caller : callers)
    caller.join();
  CHECK(wrong == std::vector<int>(4, 0));
}

TEST_CASE("a loop inside a loop body runs on the body's thread instead of waiting for itself") {
  ThreadPool pool(2);
  std::atomic<std::int64_t> total = 0;
  pool.parallel_for(4, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      total += pooled_sum(pool, 10, 0);
  });
  CHECK(total == 4 * 45);
}
