#include "core/log.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>

namespace optkit::log {
namespace {

Options g_options;
std::shared_ptr<spdlog::logger> g_logger;

spdlog::level::level_enum
to_spdlog(Level level) {
  switch (level) {
  case Level::debug:
    return spdlog::level::debug;
  case Level::info:
    return spdlog::level::info;
  case Level::warn:
    return spdlog::level::warn;
  case Level::error:
    return spdlog::level::err;
  case Level::off:
    return spdlog::level::off;
  }
  return spdlog::level::info;
}

const char*
level_name(Level level) {
  switch (level) {
  case Level::debug:
    return "debug";
  case Level::info:
    return "info";
  case Level::warn:
    return "warn";
  case Level::error:
    return "error";
  case Level::off:
    return "off";
  }
  return "info";
}

std::shared_ptr<spdlog::logger>
make_logger(const Options& options) {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(options.color ? spdlog::color_mode::automatic
                                                                                  : spdlog::color_mode::never);
  auto logger = std::make_shared<spdlog::logger>("optkit", sink);
  // JSON lines carry their own timestamp and level, so the pattern is the message alone.
  logger->set_pattern(options.format == Format::json ? "%v" : "optkit: %^%l%$: %v");
  logger->set_level(to_spdlog(options.level));
  logger->flush_on(spdlog::level::debug);
  return logger;
}

} // namespace

void
configure(const Options& options) {
  g_options = options;
  g_logger = make_logger(options);
}

const Options&
current() {
  return g_options;
}

bool
enabled(Level level) {
  return g_options.level != Level::off && level >= g_options.level;
}

void
write(Level level, std::string_view message) {
  if (!g_logger) {
    g_logger = make_logger(g_options);
  }
  if (g_options.format == Format::json) {
    nlohmann::json line = {{"time", std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count()},
                           {"level", level_name(level)},
                           {"msg", message}};
    g_logger->log(to_spdlog(level), "{}", line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    g_logger->log(to_spdlog(level), "{}", message);
  }
}

} // namespace optkit::log
