#include "model/mapped_file.hpp"

#include "core/error.hpp"

#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace optkit::model {

namespace {

// The file's bytes in anonymous memory advised onto transparent huge pages, read-only once filled.
const std::byte*
read_into_memory(int fd, std::size_t size, const std::filesystem::path& path) {
  void* memory = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED)
    throw RuntimeFailure(path.string() + ": cannot allocate " + std::to_string(size) +
                         " bytes to read it into: " + errno_text(errno));
  ::madvise(memory, size, MADV_HUGEPAGE); // advice only: without THP the copy still works
  for (std::size_t done = 0; done < size;) {
    const ssize_t n = ::pread(fd, static_cast<char*>(memory) + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::munmap(memory, size);
      throw InputError(path.string() + ": cannot read: " +
                       (n < 0 ? errno_text(err) : "the file ended early (truncated while reading?)"));
    }
    done += static_cast<std::size_t>(n);
  }
  ::mprotect(memory, size, PROT_READ);
  return static_cast<const std::byte*>(memory);
}

} // namespace

MappedFile::MappedFile(const std::filesystem::path& path, LoadMode mode) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw InputError(path.string() + ": cannot open: " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw InputError(path.string() + ": cannot stat: " + errno_text(err));
  }
  m_size = static_cast<std::size_t>(st.st_size);
  if (m_size > 0 && mode == LoadMode::read) {
    try {
      m_data = read_into_memory(fd, m_size, path);
    } catch (...) {
      ::close(fd);
      throw;
    }
    m_fd = fd;
    return;
  } else if (m_size > 0) {
    void* mapped = ::mmap(nullptr, m_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw RuntimeFailure(path.string() + ": cannot map into memory: " + errno_text(err));
    }
    // Advice only: where the filesystem caches files in large folios (ext4, XFS on recent
    // kernels), pages read under it come in 2 MiB folios mapped whole, still shared.
    ::madvise(mapped, m_size, MADV_HUGEPAGE);
    m_data = static_cast<const std::byte*>(mapped);
    m_mapped = true;
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (m_data)
    ::munmap(const_cast<std::byte*>(m_data), m_size);
  if (m_fd >= 0)
    ::close(m_fd);
}

void
MappedFile::release(std::span<const std::byte> bytes) const {
  if (bytes.empty() || bytes.data() < m_data || bytes.data() + bytes.size() > m_data + m_size)
    return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<std::uintptr_t>(bytes.data()) + page - 1) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(bytes.data()) + bytes.size()) / page * page;
  if (end <= begin)
    return;
  void* const first = reinterpret_cast<void*>(begin);
  if (m_mapped) { // advice only: a failure leaves the pages resident, nothing else
    ::madvise(first, end - begin, MADV_DONTNEED);
    return;
  }
  // The copy's pages replaced by the file's own (the copy starts at offset 0 on a page boundary):
  // the file mapped elsewhere, then moved over them in one step; on failure the copy stays.
  const auto offset = static_cast<off_t>(begin - reinterpret_cast<std::uintptr_t>(m_data));
  void* const file = ::mmap(nullptr, end - begin, PROT_READ, MAP_PRIVATE, m_fd, offset);
  if (file == MAP_FAILED)
    return;
  if (::mremap(file, end - begin, end - begin, MREMAP_MAYMOVE | MREMAP_FIXED, first) == MAP_FAILED)
    ::munmap(file, end - begin);
}

} // namespace optkit::model
