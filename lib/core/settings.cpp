#include "core/settings.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <cstdlib>

namespace optkit {
namespace {

config::Schema
make_schema() {
  using config::Field;
  using config::Type;
  auto workers = std::make_shared<config::Schema>();
  workers->name = "workers";
  workers->fields = {
      Field{.name = "jobs", .type = Type::integer, .help = "concurrent child processes", .minimum = 1, .maximum = 1024},
      Field{.name = "timeout_s",
            .type = Type::number,
            .help = "per-attempt time limit in seconds, 0 = none",
            .minimum = 0},
      Field{.name = "grace_s", .type = Type::number, .help = "seconds between SIGTERM and SIGKILL", .minimum = 0},
      Field{.name = "max_attempts",
            .type = Type::integer,
            .help = "attempts for transient failures",
            .minimum = 1,
            .maximum = 100},
      Field{.name = "gpus",
            .type = Type::list,
            .help = "CUDA device ids, one per concurrent child",
            .item = std::make_shared<Field>(Field{.name = "gpu", .type = Type::integer, .minimum = 0})},
  };
  config::Schema schema;
  schema.name = "config";
  schema.fields = {
      Field{.name = "archive", .type = Type::string, .help = "path of the run archive (SQLite)"},
      Field{.name = "log_format", .type = Type::string, .help = "text or json", .choices = {"text", "json"}},
      Field{.name = "color", .type = Type::boolean, .help = "colour on terminals"},
      Field{.name = "workers", .type = Type::object, .help = "child-process workers", .object = workers},
      Field{.name = "activations",
            .type = Type::string,
            .help = "how BF16 weights multiply activations on the CPU: fp32 (exact) or bf16 (rounded, as llama.cpp)",
            .choices = {"fp32", "bf16"}},
  };
  return schema;
}

std::filesystem::path
home_relative(const EnvLookup& env, const char* xdg_var, const char* fallback) {
  if (auto xdg = env(xdg_var); xdg && !xdg->empty()) {
    return *xdg;
  }
  const auto home = env("HOME");
  return std::filesystem::path(home && !home->empty() ? *home : "/tmp") / fallback;
}

void
apply_config_file(Settings& s, const std::filesystem::path& file) {
  const nlohmann::json doc = config::load_yaml_file(file, settings_schema());
  s.config_file = file;
  if (doc.contains("archive")) {
    // A relative archive path in a config file is relative to that file, not to the cwd.
    std::filesystem::path archive = doc["archive"].get<std::string>();
    s.archive = archive.is_absolute() ? archive : file.parent_path() / archive;
    s.archive_origin = "config";
  }
  if (doc.contains("log_format")) {
    s.log_format = doc["log_format"] == "json" ? log::Format::json : log::Format::text;
  }
  if (doc.contains("color")) {
    s.color = doc["color"].get<bool>();
  }
  if (doc.contains("activations")) {
    s.activations = doc["activations"].get<std::string>();
  }
  if (doc.contains("workers")) {
    const auto& w = doc["workers"];
    s.workers.jobs = w.value("jobs", s.workers.jobs);
    s.workers.timeout_s = w.value("timeout_s", s.workers.timeout_s);
    s.workers.grace_s = w.value("grace_s", s.workers.grace_s);
    s.workers.max_attempts = w.value("max_attempts", s.workers.max_attempts);
    if (w.contains("gpus")) {
      s.workers.gpus = w["gpus"].get<std::vector<int>>();
    }
  }
}

} // namespace

const config::Schema&
settings_schema() {
  static const config::Schema schema = make_schema();
  return schema;
}

EnvLookup
process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    return value ? std::optional<std::string>(value) : std::nullopt;
  };
}

Settings
resolve_settings(const SettingsOverrides& cli, const EnvLookup& env) {
  Settings s;
  s.archive = home_relative(env, "XDG_DATA_HOME", ".local/share") / "optkit" / "archive.db";
  s.archive_origin = "default";

  if (cli.config_file) {
    apply_config_file(s, *cli.config_file);
  } else if (auto from_env = env("OPTKIT_CONFIG"); from_env && !from_env->empty()) {
    apply_config_file(s, *from_env);
  } else {
    const auto standard = home_relative(env, "XDG_CONFIG_HOME", ".config") / "optkit" / "config.yaml";
    std::error_code ec;
    if (std::filesystem::exists(standard, ec)) {
      apply_config_file(s, standard);
    }
  }

  if (auto archive = env("OPTKIT_ARCHIVE"); archive && !archive->empty()) {
    s.archive = *archive;
    s.archive_origin = "OPTKIT_ARCHIVE";
  }
  if (env("NO_COLOR")) {
    s.color = false;
  }

  if (cli.archive) {
    s.archive = *cli.archive;
    s.archive_origin = "--archive";
  }
  if (cli.log_format) {
    s.log_format = *cli.log_format;
  }
  if (cli.no_color) {
    s.color = false;
  }
  return s;
}

nlohmann::json
settings_json(const Settings& s) {
  return {{"archive", s.archive.string()},
          {"archive_origin", s.archive_origin},
          {"config_file", s.config_file.string()},
          {"log_format", s.log_format == log::Format::json ? "json" : "text"},
          {"color", s.color},
          {"activations", s.activations},
          {"workers",
           {{"jobs", s.workers.jobs},
            {"timeout_s", s.workers.timeout_s},
            {"grace_s", s.workers.grace_s},
            {"max_attempts", s.workers.max_attempts},
            {"gpus", s.workers.gpus}}}};
}

} // namespace optkit
