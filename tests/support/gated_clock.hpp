// A clock for tests that drive real child processes in fake time: time advances only by the
// sleeps of the code under test, and only once `ready` holds (the children have reported that
// they are set up); until then each sleep waits a real millisecond without moving the clock. So a
// timeout of 0.5 s fires after 0.5 s of the pool's own polling, never before the child is ready,
// however slow the machine is.
#pragma once

#include "core/clock.hpp"

#include <chrono>
#include <functional>
#include <thread>

namespace optkit::test {

class GatedClock final : public Clock {
public:
  explicit GatedClock(std::function<bool()> ready = [] { return true; }) : m_ready(std::move(ready)) {}

  double monotonic_seconds() const override { return m_seconds; }
  std::int64_t wall_ms() const override { return 1'700'000'000'000 + static_cast<std::int64_t>(m_seconds * 1000.0); }
  void sleep_for(double seconds) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(1)); // let the children run
    if (!m_opened) {
      m_opened = m_ready();
      if (m_opened && m_on_open) {
        m_on_open();
      }
    }
    if (m_opened) {
      m_seconds += seconds;
    }
  }
  // Called once, from the sleeping thread, when `ready` first holds.
  void on_open(std::function<void()> action) { m_on_open = std::move(action); }

private:
  std::function<bool()> m_ready;
  std::function<void()> m_on_open;
  mutable bool m_opened = false;
  mutable double m_seconds = 0.0;
};

} // namespace optkit::test
