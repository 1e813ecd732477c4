#include "http/byte_pace.hpp"

#include <algorithm>
#include <stdexcept>

namespace optkit::http {

namespace {

BytePace::Clock::duration
seconds_at(double bytes, double bytes_per_second) {
  return std::chrono::duration_cast<BytePace::Clock::duration>(std::chrono::duration<double>(bytes / bytes_per_second));
}

} // namespace

BytePace::BytePace(double bytes_per_second, std::size_t burst_bytes)
    : m_bytes_per_second(bytes_per_second), m_burst(seconds_at(static_cast<double>(burst_bytes), bytes_per_second)) {
  if (!(bytes_per_second > 0))
    throw std::invalid_argument("BytePace: the pace must be positive");
}

// The generic cell rate algorithm (ITU-T I.371): the bytes read so far are paid for at the pace
// until m_paid_until; a read may start once that is less than a burst's time ahead.
BytePace::Clock::time_point
BytePace::after_reading(std::size_t bytes, Clock::time_point now) {
  const std::lock_guard lock(m_mutex);
  m_paid_until = std::max(m_paid_until, now) + seconds_at(static_cast<double>(bytes), m_bytes_per_second);
  return m_paid_until - m_burst;
}

} // namespace optkit::http
