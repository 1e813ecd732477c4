// A fixed set of worker threads for data-parallel loops in the CPU runtime. Any number of threads
// may call parallel_for at once: their loops run one after another, each on all the workers; a
// loop body that calls parallel_for on the same pool runs that inner loop on its own thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace optkit {

class ThreadPool {
public:
  // 0 = one thread per CPU this process may use (core/available_cpus.hpp).
  explicit ThreadPool(unsigned threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned size() const { return static_cast<unsigned>(m_workers.size()) + 1; }

  // Calls body(begin, end) over [0, count) on the workers and the calling thread; returns when
  // all of it is done. Rethrows the first exception. With chunk == 0 the range is split into
  // size() equal contiguous parts; with chunk > 0 each thread keeps taking the next `chunk` items
  // until none are left, so a thread slowed by something else on the machine takes fewer.
  void parallel_for(std::int64_t count, const std::function<void(std::int64_t, std::int64_t)>& body,
                    std::int64_t chunk = 0);

private:
  void worker_loop(unsigned index);
  void run_share(unsigned index);

  // Workers and the caller spin briefly before sleeping: a decode step issues ~10 loops per
  // layer, and a condition-variable wake-up per loop would cost a tenth of the step. A pool with
  // more threads than the process has CPUs sleeps at once instead.
  std::vector<std::thread> m_workers;
  std::mutex m_call_mutex; // held by the caller whose loop the workers are running
  std::mutex m_mutex;
  std::condition_variable m_wake;
  std::condition_variable m_done;
  const std::function<void(std::int64_t, std::int64_t)>* m_body = nullptr;
  std::int64_t m_count = 0;
  std::int64_t m_chunk = 0;
  std::atomic<std::int64_t> m_next = 0; // next unclaimed item when m_chunk > 0
  std::atomic<std::uint64_t> m_generation = 0;
  std::atomic<unsigned> m_pending = 0;
  std::atomic<bool> m_stop = false;
  std::exception_ptr m_error; // guarded by m_mutex
};

} // namespace optkit
