// Time as a seam: production code asks a Clock, tests hand in a FakeClock so progress output and
// timeouts are deterministic (the ninja habit).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace optkit {

// Seconds elapsed on the steady clock since `start` (for timing a stage in a report).
double seconds_since(std::chrono::steady_clock::time_point start);

class Clock {
public:
  virtual ~Clock() = default;
  // Seconds on a monotonic clock with an arbitrary origin.
  virtual double monotonic_seconds() const = 0;
  // Milliseconds since the Unix epoch (UTC).
  virtual std::int64_t wall_ms() const = 0;
  // Waits `seconds` on this clock: a real sleep on the system clock, a jump in fake time.
  virtual void sleep_for(double seconds) const = 0;
};

class SystemClock final : public Clock {
public:
  double monotonic_seconds() const override;
  std::int64_t wall_ms() const override;
  void sleep_for(double seconds) const override;
  static const SystemClock& instance();
};

class FakeClock final : public Clock {
public:
  double monotonic_seconds() const override { return m_seconds; }
  std::int64_t wall_ms() const override { return m_epoch_ms + static_cast<std::int64_t>(m_seconds * 1000.0); }
  // Time moves by exactly the requested amount, at once: a loop that sleeps on a FakeClock runs
  // in virtual time.
  void sleep_for(double seconds) const override { m_seconds += seconds; }
  void advance(double seconds) { m_seconds += seconds; }

private:
  mutable double m_seconds = 0.0;
  std::int64_t m_epoch_ms = 1'700'000'000'000;
};

// "2026-11-21T13:05:09.123Z"
std::string iso8601_utc(std::int64_t epoch_ms);

// A point in time for --since filters: an ISO date ("2026-11-01"), an ISO timestamp
// ("2026-11-01T12:00:00Z", "2026-11-01 12:00:00"), or an age before `now_ms` ("90s", "30m",
// "12h", "7d", "2w"). nullopt when the text is none of these.
std::optional<std::int64_t> parse_time_point(std::string_view text, std::int64_t now_ms);

} // namespace optkit
