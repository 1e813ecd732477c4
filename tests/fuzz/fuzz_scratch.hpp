// A scratch path of this fuzzer process, for targets whose reader takes a file: `stem-PID`
// (plus `suffix`) under the temporary folder, removed with what it holds when the fuzzer exits.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>
#include <unistd.h>

class FuzzScratch {
public:
  explicit FuzzScratch(const std::string& stem, const std::string& suffix = "")
      : m_path(std::filesystem::temp_directory_path() / (stem + "-" + std::to_string(::getpid()) + suffix)) {}
  ~FuzzScratch() {
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
  }
  FuzzScratch(const FuzzScratch&) = delete;
  FuzzScratch& operator=(const FuzzScratch&) = delete;
  const std::filesystem::path& path() const { return m_path; }

private:
  std::filesystem::path m_path;
};
