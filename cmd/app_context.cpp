#include "app_context.hpp"

#include "core/atomic_file.hpp"

#include <iostream>
#include <unistd.h>

namespace optkit::cmd {

archive::RunArchive&
AppContext::archive() {
  if (!m_archive) {
    m_archive = std::make_unique<archive::RunArchive>(settings.archive);
  }
  return *m_archive;
}

bool
AppContext::color_stdout() const {
  return settings.color && ::isatty(STDOUT_FILENO);
}

std::vector<std::string>
AppContext::worker_global_args() const {
  std::vector<std::string> args = {"--archive", settings.archive.string(), "--log-format",
                                   settings.log_format == log::Format::json ? "json" : "text", "--no-color"};
  if (!settings.config_file.empty()) {
    args.insert(args.end(), {"--config", settings.config_file.string()});
  }
  for (int i = 0; i < flags.verbose; ++i) {
    args.push_back("-v");
  }
  return args;
}

void
AppContext::emit(const std::string& text, const std::string& output) const {
  if (output.empty() || output == "-") {
    std::cout << text << std::flush;
  } else {
    write_file_atomic(output, text);
  }
}

const Command*
CommandRegistry::selected() const {
  const Command* best = nullptr;
  std::size_t best_depth = 0;
  for (const auto& command : m_commands) {
    if (!command.app->parsed()) {
      continue;
    }
    std::size_t depth = 0;
    for (const CLI::App* a = command.app; a; a = a->get_parent()) {
      ++depth;
    }
    if (depth > best_depth) {
      best = &command;
      best_depth = depth;
    }
  }
  return best;
}

CLI::Option*
add_format_option(CLI::App& app, std::string& target, const std::string& default_value) {
  target = default_value;
  return app.add_option("--format", target, "output format")
      ->check(CLI::IsMember({"table", "json", "csv"}))
      ->capture_default_str();
}

} // namespace optkit::cmd
