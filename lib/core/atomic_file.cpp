#include "core/atomic_file.hpp"

#include "core/error.hpp"
#include "core/process_identity.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <fcntl.h>
#include <random>
#include <unistd.h>

namespace optkit {
namespace {

// "HOST.PID.RANDOM": whose temporary name it is, so a later process can tell whether its writer
// still lives.
std::string
unique_suffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}.{}.{:08x}", host_name(), ::getpid(), static_cast<std::uint32_t>(rng()));
}

// Whether the writer named by a unique_suffix() is a process of this host that no longer exists.
// Names of other hosts (a shared file system) and names that do not parse are left alone.
bool
writer_is_gone(std::string_view suffix, const std::string& this_host) {
  const auto random_at = suffix.rfind('.');
  if (random_at == std::string_view::npos || random_at == 0)
    return false;
  const auto pid_at = suffix.rfind('.', random_at - 1);
  if (pid_at == std::string_view::npos || suffix.substr(0, pid_at) != this_host)
    return false;
  const auto digits = suffix.substr(pid_at + 1, random_at - pid_at - 1);
  std::int64_t pid = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  return ec == std::errc() && end == digits.data() + digits.size() && process_is_gone(pid);
}

// Removes the staging folders of `destination` whose writer was killed before it could clean up
// (kill -9, OOM), and the old folders a killed commit() had set aside once the new one is in
// place. A set-aside folder without a destination is the only copy left, so it stays.
void
sweep_abandoned_siblings(const std::filesystem::path& destination) {
  const std::filesystem::path parent = destination.parent_path().empty() ? "." : destination.parent_path();
  const std::string name = destination.filename().string();
  const std::string this_host = host_name();
  std::error_code ec;
  const bool destination_exists = std::filesystem::exists(destination, ec);
  for (const std::string_view kind : {"partial", "replaced"}) {
    if (kind == "replaced" && !destination_exists)
      continue;
    const std::string prefix = fmt::format(".{}.{}.", name, kind);
    for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
      const std::string file = entry.path().filename().string();
      if (file.starts_with(prefix) && writer_is_gone(std::string_view(file).substr(prefix.size()), this_host))
        std::filesystem::remove_all(entry.path(), ec);
    }
  }
}

void
fsync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

} // namespace

void
write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  const std::filesystem::path temp = path.string() + ".tmp." + unique_suffix();
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw RuntimeFailure(fmt::format("cannot create {}: {}", temp.string(), errno_text(errno)));
  }
  const char* data = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    const ssize_t written = ::write(fd, data, left);
    if (written < 0 && errno == EINTR) {
      continue;
    }
    if (written <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(temp.c_str());
      throw RuntimeFailure(fmt::format("cannot write {}: {}", path.string(), errno_text(err)));
    }
    data += written;
    left -= static_cast<std::size_t>(written);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    throw RuntimeFailure(fmt::format("cannot flush {}: {}", path.string(), errno_text(err)));
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    throw RuntimeFailure(fmt::format("cannot rename {} into place: {}", path.string(), errno_text(err)));
  }
  fsync_directory(path.parent_path());
}

StagedDirectory::StagedDirectory(std::filesystem::path destination, ExistingDestination existing)
    : m_destination(std::move(destination)), m_replace(existing == ExistingDestination::replace) {
  sweep_abandoned_siblings(m_destination);
  std::error_code ec;
  if (!m_replace && std::filesystem::exists(m_destination, ec)) {
    throw InputError(fmt::format("{} already exists; remove it or choose another output path", m_destination.string()));
  }
  const auto parent = m_destination.parent_path();
  if (!parent.empty()) {
    std::filesystem::create_directories(parent, ec);
    if (ec) {
      throw RuntimeFailure(fmt::format("cannot create {}: {}", parent.string(), ec.message()));
    }
  }
  m_staging = parent / fmt::format(".{}.partial.{}", m_destination.filename().string(), unique_suffix());
  if (!std::filesystem::create_directory(m_staging, ec) || ec) {
    throw RuntimeFailure(fmt::format("cannot create {}: {}", m_staging.string(), ec.message()));
  }
}

StagedDirectory::~StagedDirectory() {
  if (!m_committed) {
    std::error_code ec;
    std::filesystem::remove_all(m_staging, ec);
  }
}

void
StagedDirectory::commit() {
  std::error_code ec;
  std::filesystem::path replaced; // the old destination, moved aside until the new one is in place
  if (m_replace && std::filesystem::exists(m_destination, ec)) {
    replaced = m_destination.parent_path() /
               fmt::format(".{}.replaced.{}", m_destination.filename().string(), unique_suffix());
    if (::rename(m_destination.c_str(), replaced.c_str()) != 0)
      throw RuntimeFailure(fmt::format("cannot move {} aside: {}", m_destination.string(), errno_text(errno)));
  }
  if (::rename(m_staging.c_str(), m_destination.c_str()) != 0) {
    const int err = errno;
    if (!replaced.empty())
      ::rename(replaced.c_str(), m_destination.c_str()); // put the old one back
    throw RuntimeFailure(fmt::format("cannot move {} into place at {}: {}", m_staging.string(), m_destination.string(),
                                     errno_text(err)));
  }
  m_committed = true;
  fsync_directory(m_destination.parent_path());
  if (!replaced.empty())
    std::filesystem::remove_all(replaced, ec);
}

} // namespace optkit
