// The pace at which a server reads request bodies: a token bucket that all its connections share.
// An idle server reads up to the burst at once; past it, bodies are read at `bytes_per_second` in
// all, each connection taking its turn, and TCP's flow control holds back whoever sends faster.
// No engine turns prompt bytes into work at tens of MB/s, while reading and copying them at
// loopback speed takes the cores a server's generation needs (perf_serve_hostile).
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>

namespace optkit::http {

class BytePace {
public:
  using Clock = std::chrono::steady_clock;

  BytePace(double bytes_per_second, std::size_t burst_bytes);

  // Takes `bytes` just read from the bucket; returns when the next read may start (`now` or
  // earlier: at once). Thread-safe.
  Clock::time_point after_reading(std::size_t bytes, Clock::time_point now);
  Clock::time_point after_reading(std::size_t bytes) { return after_reading(bytes, Clock::now()); }

private:
  std::mutex m_mutex;
  double m_bytes_per_second;
  Clock::duration m_burst;          // the burst, as the time the pace takes to read it
  Clock::time_point m_paid_until{}; // the time by which the bytes read so far are paid for at the pace
};

} // namespace optkit::http
