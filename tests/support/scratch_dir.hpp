// A scratch directory: created fresh under the temporary folder, removed with its contents when
// the object goes (the end of a test, or the process's exit for a static one). Shared by the unit
// tests and the fuzz targets.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace optkit::test {

class ScratchDir {
public:
  ScratchDir() {
    // mkdtemp overwrites the pattern's last six characters with a unique suffix and creates the folder.
    std::string pattern = (std::filesystem::temp_directory_path() / "optkit-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
    m_path = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return m_path; }
  std::filesystem::path operator/(const std::string& name) const { return m_path / name; }

private:
  std::filesystem::path m_path;
};

} // namespace optkit::test
