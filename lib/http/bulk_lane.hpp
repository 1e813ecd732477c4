// The thread that runs the handlers of requests with large bodies (ServerOptions::bulk_body_bytes):
// one at a time, in arrival order, at the lowest CPU priority, so that parsing or tokenizing a
// 32 MiB body never holds up the small requests the I/O threads answer meanwhile. At most
// `max_waiting` jobs wait; beyond that post() refuses, so a client sending huge bodies on many
// connections cannot pile them up in memory.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace optkit::http {

class BulkLane {
public:
  explicit BulkLane(std::size_t max_waiting);
  ~BulkLane(); // stop()
  BulkLane(const BulkLane&) = delete;
  BulkLane& operator=(const BulkLane&) = delete;

  // Queues `job`; false when `max_waiting` jobs already wait or the lane has stopped.
  bool post(std::function<void()> job);
  // Drops the jobs not yet started and waits for the running one. Idempotent.
  void stop();

private:
  void run();

  std::size_t m_max_waiting;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  std::deque<std::function<void()>> m_waiting;
  bool m_stopping = false;
  std::thread m_thread;
};

} // namespace optkit::http
