#include "app_context.hpp"

#include "core/atomic_file.hpp"
#include "core/resource_paths.hpp"
#include "core/text.hpp"

#include <fmt/format.h>

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

archive::RunContext
AppContext::run_context(double timeout_s) {
  return {executable_path(), worker_global_args(), &archive(), run_id, timeout_s, !flags.quiet};
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

void
AppContext::emit_json(nlohmann::json result, const std::string& output) const {
  if (run_id != 0)
    result["run_id"] = run_id;
  emit(result.dump(2) + "\n", output);
}

void
AppContext::emit_result(const std::string& format_text, const CommandResult& result, const std::string& output) const {
  const OutputFormat format = parse_output_format(format_text);
  if (format == OutputFormat::json)
    emit_json(result.json, output);
  else if (format == OutputFormat::csv)
    emit(result.table.render_csv(), output);
  else
    emit(result.before + result.table.render_text(color_stdout()) + result.after, output);
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

nlohmann::json
resolved_options(const CLI::App* app) {
  nlohmann::json options = nlohmann::json::object();
  for (const CLI::Option* opt : app->get_options()) {
    if (opt->get_group().empty() || opt->get_name() == "--help" || opt->get_name() == "-h") {
      continue;
    }
    const std::string name = opt->get_name();
    if (opt->count() > 0) {
      const auto& results = opt->results();
      options[name] = results.size() == 1 ? nlohmann::json(results.front()) : nlohmann::json(results);
    } else if (!opt->get_default_str().empty()) {
      options[name] = opt->get_default_str();
    }
  }
  return options;
}

// A mistyped or missing subcommand, named with the choices at that level.
std::string
missing_subcommand_message(const CLI::App& app, const CLI::RequiredError& error) {
  const CLI::App* level = &app;
  std::string path = "optkit";
  for (bool deeper = true; deeper;) {
    deeper = false;
    for (const CLI::App* sub : level->get_subcommands({})) {
      if (sub->parsed()) {
        level = sub;
        path += " " + sub->get_name();
        deeper = true;
        break;
      }
    }
  }
  std::vector<std::string> choices;
  for (const CLI::App* sub : level->get_subcommands({})) {
    if (!sub->get_group().empty()) {
      choices.push_back(sub->get_name());
    }
  }
  if (choices.empty()) {
    return fmt::format("{}; run '{} --help'", error.what(), path);
  }
  const auto unknown = level->remaining();
  if (!unknown.empty() && !unknown.front().starts_with("-")) {
    return fmt::format("unknown command '{} {}'; choose one of: {}", path, unknown.front(), join(choices, ", "));
  }
  return fmt::format("'{}' needs a command: {}; run '{} --help'", path, join(choices, ", "), path);
}

} // namespace optkit::cmd
