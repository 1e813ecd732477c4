// Logging seam: everything logs through these functions; only log.cpp knows spdlog.
// Logs go to stderr so stdout stays clean for results (tables, JSON, CSV).
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace optkit::log {

enum class Level { debug, info, warn, error, off };
enum class Format { text, json };

struct Options {
  Level level = Level::info;
  Format format = Format::text;
  bool color = true;
};

// Replaces the process-wide logger configuration. Safe to call again (tests do).
void configure(const Options& options);
const Options& current();
bool enabled(Level level);
void write(Level level, std::string_view message);

template <typename... Args>
void
debug(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::debug)) {
    write(Level::debug, fmt::format(f, std::forward<Args>(args)...));
  }
}

template <typename... Args>
void
info(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::info)) {
    write(Level::info, fmt::format(f, std::forward<Args>(args)...));
  }
}

template <typename... Args>
void
warn(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::warn)) {
    write(Level::warn, fmt::format(f, std::forward<Args>(args)...));
  }
}

template <typename... Args>
void
error(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::error)) {
    write(Level::error, fmt::format(f, std::forward<Args>(args)...));
  }
}

} // namespace optkit::log
