// Helpers shared by the unit tests: scratch directories, the optkit binary under test, polling.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "support/scratch_dir.hpp"

#include <unistd.h>

namespace optkit::test {

// The optkit binary built next to the tests (set by CMake).
inline std::filesystem::path
optkit_binary() {
  return OPTKIT_TEST_BINARY;
}

// testdata/ of the source tree.
inline std::filesystem::path
testdata_dir() {
  return OPTKIT_TEST_DATA;
}

// profiles/ of the source tree (systems, serving profiles, the perf database).
inline std::filesystem::path
profiles_dir() {
  return testdata_dir().parent_path() / "profiles";
}

// The bundled tiny Llama-architecture model (testdata/models/MODEL_CARD.md).
inline std::filesystem::path
tiny_base() {
  return testdata_dir() / "models" / "tiny-base";
}

inline std::string
read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline void
write_text(const std::filesystem::path& file, const std::string& text) {
  std::ofstream(file, std::ios::binary) << text;
}

// Polls `condition` every 10 ms until it holds or `timeout_s` passes; returns whether it held.
inline bool
wait_until(const std::function<bool()>& condition, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

// True when no process with this pid runs any more (gone, or a zombie nobody has reaped yet).
inline bool
process_gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) {
    return true;
  }
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z';
}

} // namespace optkit::test
