#include "http/bulk_lane.hpp"

#include <sys/resource.h>
#include <unistd.h>

namespace optkit::http {

BulkLane::BulkLane(std::size_t max_waiting) : m_max_waiting(max_waiting), m_thread([this] { run(); }) {}

BulkLane::~BulkLane() {
  stop();
}

bool
BulkLane::post(std::function<void()> job) {
  const std::lock_guard lock(m_mutex);
  if (m_stopping || m_waiting.size() >= m_max_waiting)
    return false;
  m_waiting.push_back(std::move(job));
  m_wake.notify_one();
  return true;
}

void
BulkLane::stop() {
  std::deque<std::function<void()>> dropped; // destroyed outside the lock: their exchanges cancel
  {
    const std::lock_guard lock(m_mutex);
    m_stopping = true;
    dropped.swap(m_waiting);
    m_wake.notify_one();
  }
  if (m_thread.joinable() && m_thread.get_id() != std::this_thread::get_id())
    m_thread.join();
}

void
BulkLane::run() {
  // Linux gives each thread its own nice value; raising it needs no privilege. Where it fails the
  // lane still keeps large bodies off the I/O threads.
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19);
  while (true) {
    std::function<void()> job;
    {
      std::unique_lock lock(m_mutex);
      m_wake.wait(lock, [&] { return m_stopping || !m_waiting.empty(); });
      if (m_stopping)
        return;
      job = std::move(m_waiting.front());
      m_waiting.pop_front();
    }
    job();
  }
}

} // namespace optkit::http
