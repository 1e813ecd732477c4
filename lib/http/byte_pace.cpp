#include "http/byte_pace.hpp"

#include <algorithm>
#include <stdexcept>

namespace optkit::http {

namespace {

// At most a year, so that no pace, however slow, overflows the clock.
BytePace::Clock::duration
seconds_at(double bytes, double bytes_per_second) {
  const double seconds = std::min(bytes / bytes_per_second, 365.0 * 24 * 3600);
  return std::chrono::duration_cast<BytePace::Clock::duration>(std::chrono::duration<double>(seconds));
}

double
positive(double bytes_per_second) {
  if (!(bytes_per_second > 0))
    throw std::invalid_argument("BytePace: the pace must be positive");
  return bytes_per_second;
}

} // namespace

// The pace is checked before the burst is converted with it: a zero pace would make it infinite.
BytePace::BytePace(double bytes_per_second, std::size_t burst_bytes)
    : m_bytes_per_second(positive(bytes_per_second))
    , m_burst(seconds_at(static_cast<double>(burst_bytes), m_bytes_per_second)) {}

// The generic cell rate algorithm (ITU-T I.371): the bytes read so far are paid for at the pace
// until m_paid_until; a read may start once that is less than a burst's time ahead.
BytePace::Clock::time_point
BytePace::after_reading(std::size_t bytes, Clock::time_point now) {
  const std::lock_guard lock(m_mutex);
  m_paid_until = std::max(m_paid_until, now) + seconds_at(static_cast<double>(bytes), m_bytes_per_second);
  return m_paid_until - m_burst;
}

} // namespace optkit::http
