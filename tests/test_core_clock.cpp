#include "core/clock.hpp"

#include <doctest/doctest.h>

using namespace optkit;

TEST_CASE("iso8601_utc formats milliseconds since the epoch") {
  CHECK(iso8601_utc(0) == "1970-01-01T00:00:00.000Z");
  CHECK(iso8601_utc(1'700'000'000'123) == "2023-11-14T22:13:20.123Z");
}

TEST_CASE("parse_time_point reads dates, timestamps and ages") {
  const std::int64_t now = 1'700'000'000'000;
  CHECK(parse_time_point("2023-11-14", now) == 1'699'920'000'000);
  CHECK(parse_time_point("2023-11-14T22:13:20Z", now) == 1'700'000'000'000);
  CHECK(parse_time_point("2023-11-14 22:13:20", now) == 1'700'000'000'000);
  CHECK(parse_time_point("90s", now) == now - 90'000);
  CHECK(parse_time_point("30m", now) == now - 1'800'000);
  CHECK(parse_time_point("12h", now) == now - 43'200'000);
  CHECK(parse_time_point("7d", now) == now - 604'800'000);
  CHECK(parse_time_point("2w", now) == now - 1'209'600'000);
}

TEST_CASE("parse_time_point rejects what it cannot read") {
  const std::int64_t now = 1'700'000'000'000;
  for (const char* bad : {"", "d", "yesterday", "7x", "2023-13-01", "2023-11-14T25:00:00Z", "2023-11-14Tnoon",
                          "2023-11-14T10:00:00+02:00", "-5d"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_time_point(bad, now).has_value());
  }
}

TEST_CASE("FakeClock only moves when told") {
  FakeClock clock;
  const auto wall = clock.wall_ms();
  CHECK(clock.monotonic_seconds() == 0.0);
  clock.advance(2.5);
  CHECK(clock.monotonic_seconds() == 2.5);
  CHECK(clock.wall_ms() == wall + 2500);
}
