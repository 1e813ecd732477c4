// Nothing half-written: files and directories are built under a temporary name beside their
// destination and renamed into place only when complete.
#pragma once

#include <filesystem>
#include <string_view>

namespace optkit {

// Writes `content` to a temporary sibling of `path`, fsyncs it and renames it over `path`.
// Throws RuntimeFailure naming the path on any error; `path` is then untouched.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

// What a StagedDirectory does about a destination that already exists.
enum class ExistingDestination {
  refuse, // InputError at construction: outputs are never merged into
  replace // commit() swaps the old folder out and removes it
};

// A directory under construction: created as a hidden temporary sibling of `destination`,
// renamed to `destination` by commit(), removed with its contents if never committed. The
// sibling's name records this host and pid, so the constructor first sweeps the siblings a killed
// process of this host left behind.
class StagedDirectory {
public:
  explicit StagedDirectory(std::filesystem::path destination,
                           ExistingDestination existing = ExistingDestination::refuse);
  ~StagedDirectory();
  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;

  const std::filesystem::path& path() const { return m_staging; }
  const std::filesystem::path& destination() const { return m_destination; }
  void commit();

private:
  std::filesystem::path m_destination;
  std::filesystem::path m_staging;
  bool m_replace = false;
  bool m_committed = false;
};

} // namespace optkit
