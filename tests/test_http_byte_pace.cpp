// The body pace's token bucket, on a clock the test sets: a burst goes through at once, the bytes
// past it come due at the pace in the order they were read, and an idle bucket refills.
#include "http/byte_pace.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <stdexcept>

using namespace optkit::http;
using namespace std::chrono_literals;

namespace {

bool
near(BytePace::Clock::time_point a, BytePace::Clock::time_point b) {
  return a - b < 1us && b - a < 1us;
}

} // namespace

TEST_CASE("the body pace: a burst at once, then each read due at the pace after the ones before it") {
  BytePace pace(1000.0, 500); // 1000 bytes a second past a burst of 500
  const BytePace::Clock::time_point start = BytePace::Clock::time_point{} + 100s;
  CHECK(pace.after_reading(300, start) <= start);
  CHECK(pace.after_reading(200, start) <= start); // the burst, all at once
  CHECK(near(pace.after_reading(100, start), start + 100ms));
  CHECK(near(pace.after_reading(100, start), start + 200ms)); // another reader waits its turn after the first
  // At the pace, a reader that comes when it is due waits no longer than its own bytes' time.
  CHECK(near(pace.after_reading(50, start + 200ms), start + 250ms));
}

TEST_CASE("the body pace: an idle bucket refills to the burst, no further") {
  BytePace pace(1000.0, 500);
  const BytePace::Clock::time_point start = BytePace::Clock::time_point{} + 100s;
  CHECK(near(pace.after_reading(1500, start), start + 1s));
  const auto later = start + 1s + 10s; // idle for 10 s: the bucket holds the burst, not 10 s of bytes
  CHECK(pace.after_reading(500, later) <= later);
  CHECK(near(pace.after_reading(500, later), later + 500ms));
}

TEST_CASE("the body pace must be positive; a very slow one waits a year at most, without overflow") {
  CHECK_THROWS_AS(BytePace(0.0, 500), std::invalid_argument);
  CHECK_THROWS_AS(BytePace(-1.0, 500), std::invalid_argument);
  BytePace slow(1e-300, 0);
  const BytePace::Clock::time_point start = BytePace::Clock::time_point{} + 100s;
  const auto due = slow.after_reading(1000, start);
  CHECK(due > start);
  CHECK(due - start <= std::chrono::hours(24 * 366));
}
