// Nothing half-written: files and directories are built under a temporary name beside their
// destination and renamed into place only when complete.
#pragma once

#include <filesystem>
#include <string_view>

namespace optkit {

// Writes `content` to a temporary sibling of `path`, fsyncs it and renames it over `path`.
// Throws RuntimeFailure naming the path on any error; `path` is then untouched.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

// A directory under construction: created as a hidden temporary sibling of `destination`,
// renamed to `destination` by commit(), removed with its contents if never committed.
class StagedDirectory {
public:
  // Fails with InputError if `destination` already exists (we never merge into a stale output).
  explicit StagedDirectory(std::filesystem::path destination);
  ~StagedDirectory();
  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;

  const std::filesystem::path& path() const { return m_staging; }
  const std::filesystem::path& destination() const { return m_destination; }
  void commit();

private:
  std::filesystem::path m_destination;
  std::filesystem::path m_staging;
  bool m_committed = false;
};

} // namespace optkit
