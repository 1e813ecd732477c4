#include "runtime/thread_pool.hpp"

#include <algorithm>

namespace optkit::runtime {

namespace {

std::pair<std::int64_t, std::int64_t>
part(std::int64_t count, unsigned parts, unsigned index) {
  const std::int64_t base = count / parts, extra = count % parts;
  const std::int64_t begin = index * base + std::min<std::int64_t>(index, extra);
  return {begin, begin + base + (static_cast<std::int64_t>(index) < extra ? 1 : 0)};
}

} // namespace

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
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
    std::unique_lock lock(m_mutex);
    m_wake.wait(lock, [&] { return m_stop || m_generation != seen; });
    if (m_stop)
      return;
    seen = m_generation;
    const auto* body = m_body;
    const auto [begin, end] = part(m_count, size(), index);
    lock.unlock();
    std::exception_ptr error;
    if (begin < end) {
      try {
        (*body)(begin, end);
      } catch (...) {
        error = std::current_exception();
      }
    }
    lock.lock();
    if (error && !m_error)
      m_error = error;
    if (--m_pending == 0)
      m_done.notify_one();
  }
}

void
ThreadPool::parallel_for(std::int64_t count, const std::function<void(std::int64_t, std::int64_t)>& body) {
  if (count <= 0)
    return;
  if (m_workers.empty() || count == 1) {
    body(0, count);
    return;
  }
  {
    std::lock_guard lock(m_mutex);
    m_body = &body;
    m_count = count;
    m_pending = static_cast<unsigned>(m_workers.size());
    m_error = nullptr;
    ++m_generation;
  }
  m_wake.notify_all();
  std::exception_ptr error;
  const auto [begin, end] = part(count, size(), 0);
  try {
    if (begin < end)
      body(begin, end);
  } catch (...) {
    error = std::current_exception();
  }
  std::unique_lock lock(m_mutex);
  m_done.wait(lock, [&] { return m_pending == 0; });
  if (!error)
    error = m_error;
  if (error)
    std::rethrow_exception(error);
}

} // namespace optkit::runtime
