#include "core/thread_pool.hpp"

#include "core/available_cpus.hpp"

#include <algorithm>
#include <chrono>

namespace optkit {

namespace {

constexpr auto kSpin = std::chrono::microseconds(100);

// Tells the core this thread is spinning (frees the pipeline for its sibling hyperthread).
inline void
cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// The pool whose loop this thread is running, so a loop body that starts a loop of its own on the
// same pool runs it inline instead of waiting for itself.
thread_local const ThreadPool* t_running_pool = nullptr;

struct RunningPool {
  const ThreadPool* previous;
  explicit RunningPool(const ThreadPool* pool) : previous(t_running_pool) { t_running_pool = pool; }
  ~RunningPool() { t_running_pool = previous; }
  RunningPool(const RunningPool&) = delete;
  RunningPool& operator=(const RunningPool&) = delete;
};

std::pair<std::int64_t, std::int64_t>
part(std::int64_t count, unsigned parts, unsigned index) {
  const std::int64_t base = count / parts, extra = count % parts;
  const std::int64_t begin = index * base + std::min<std::int64_t>(index, extra);
  return {begin, begin + base + (static_cast<std::int64_t>(index) < extra ? 1 : 0)};
}

// Spins until `done()` holds or kSpin passes; returns done(). A pool with more threads than the
// process has CPUs does not spin: a spinning thread would hold a CPU that a thread with work to do
// is waiting for, and every loop would take a scheduler slice.
template <typename Done>
bool
spin_until(unsigned pool_threads, Done done) {
  if (pool_threads > available_cpus())
    return done();
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    cpu_relax();
  }
  return true;
}

} // namespace

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0)
    threads = available_cpus();
  for (unsigned i = 1; i < threads; ++i)
    m_workers.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_wake.notify_all();
  for (auto& w : m_workers)
    w.join();
}

void
ThreadPool::worker_loop(unsigned index) {
  std::uint64_t seen = 0;
  for (;;) {
    const auto ready = [&] { return m_stop.load() || m_generation.load(std::memory_order_acquire) != seen; };
    if (!spin_until(size(), ready)) {
      std::unique_lock lock(m_mutex);
      m_wake.wait(lock, ready);
    }
    if (m_stop)
      return;
    seen = m_generation.load(std::memory_order_acquire);
    try {
      const RunningPool running(this);
      run_share(index);
    } catch (...) {
      std::lock_guard lock(m_mutex);
      if (!m_error)
        m_error = std::current_exception();
    }
    if (m_pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(m_mutex);
      m_done.notify_one();
    }
  }
}

void
ThreadPool::run_share(unsigned index) {
  if (m_chunk <= 0) {
    const auto [begin, end] = part(m_count, size(), index);
    if (begin < end)
      (*m_body)(begin, end);
    return;
  }
  for (;;) {
    const std::int64_t begin = m_next.fetch_add(m_chunk, std::memory_order_relaxed);
    if (begin >= m_count)
      return;
    (*m_body)(begin, std::min(begin + m_chunk, m_count));
  }
}

void
ThreadPool::parallel_for(std::int64_t count, const std::function<void(std::int64_t, std::int64_t)>& body,
                         std::int64_t chunk) {
  if (count <= 0)
    return;
  if (m_workers.empty() || count == 1 || t_running_pool == this) {
    body(0, count);
    return;
  }
  // One loop at a time: a second caller waits here until the first's loop has finished.
  const std::lock_guard call(m_call_mutex);
  const RunningPool running(this);
  {
    std::lock_guard lock(m_mutex);
    m_body = &body;
    m_count = count;
    m_chunk = chunk;
    m_next.store(0, std::memory_order_relaxed);
    m_error = nullptr;
    m_pending.store(static_cast<unsigned>(m_workers.size()), std::memory_order_relaxed);
    m_generation.fetch_add(1, std::memory_order_release);
  }
  m_wake.notify_all();
  std::exception_ptr error;
  try {
    run_share(0);
  } catch (...) {
    error = std::current_exception();
  }
  const auto finished = [&] { return m_pending.load(std::memory_order_acquire) == 0; };
  std::unique_lock lock(m_mutex, std::defer_lock);
  if (!spin_until(size(), finished)) {
    lock.lock();
    m_done.wait(lock, finished);
  } else {
    lock.lock();
  }
  if (!error)
    error = m_error;
  if (error)
    std::rethrow_exception(error);
}

} // namespace optkit
