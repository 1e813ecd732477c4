#include "runtime/hidden_states.hpp"

#include "core/error.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

namespace optkit::runtime {

HiddenStates::HiddenStates(std::int64_t rows, std::int64_t hidden,
                           const std::optional<std::filesystem::path>& scratch_dir)
    : m_rows(rows), m_hidden(hidden) {
  if (!scratch_dir) {
    m_memory.assign(static_cast<std::size_t>(rows * hidden), 0.0f);
    return;
  }
  const auto size = bytes();
  m_fd = ::open(scratch_dir->c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (m_fd < 0)
    throw RuntimeFailure(fmt::format("{}: cannot create a scratch file for {} bytes of calibration states: {}",
                                     scratch_dir->string(), size, errno_text(errno)));
  if (size == 0)
    return;
  if (::ftruncate(m_fd, static_cast<off_t>(size)) != 0) {
    const int err = errno;
    ::close(m_fd);
    throw RuntimeFailure(
        fmt::format("{}: cannot size a scratch file to {} bytes: {}", scratch_dir->string(), size, errno_text(err)));
  }
  void* mapped = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, m_fd, 0);
  if (mapped == MAP_FAILED) {
    const int err = errno;
    ::close(m_fd);
    throw RuntimeFailure(
        fmt::format("{}: cannot map a scratch file of {} bytes: {}", scratch_dir->string(), size, errno_text(err)));
  }
  m_mapped = static_cast<float*>(mapped);
}

HiddenStates::~HiddenStates() {
  if (m_mapped)
    ::munmap(m_mapped, bytes());
  if (m_fd >= 0)
    ::close(m_fd);
}

void
HiddenStates::release(std::int64_t first, std::int64_t count) {
  if (!m_mapped || count <= 0)
    return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin_address = reinterpret_cast<std::uintptr_t>(m_mapped + first * m_hidden);
  const auto end_address = reinterpret_cast<std::uintptr_t>(m_mapped + (first + count) * m_hidden);
  const auto begin = (begin_address + page - 1) / page * page, end = end_address / page * page;
  // A shared file mapping keeps its dirty pages in the page cache: dropping them from this
  // process's page tables loses nothing. Advice only: a failure leaves them resident.
  if (end > begin)
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

} // namespace optkit::runtime
