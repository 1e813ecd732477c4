// optkit's own settings and where each came from. Precedence, lowest first:
// built-in defaults < config file (--config, $OPTKIT_CONFIG, ~/.config/optkit/config.yaml)
// < environment ($OPTKIT_ARCHIVE, $NO_COLOR) < command-line flags.
#pragma once

#include "core/log.hpp"
#include "core/yaml_schema.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace optkit {

struct WorkerSettings {
  int jobs = 1;          // concurrent child processes
  double timeout_s = 0;  // per attempt; 0 = no limit
  double grace_s = 10;   // SIGTERM → SIGKILL delay
  int max_attempts = 2;  // for failures a worker spec marks transient
  std::vector<int> gpus; // CUDA device ids handed out one per child
};

struct Settings {
  std::filesystem::path archive;
  std::string archive_origin;        // "--archive", "OPTKIT_ARCHIVE", "config", "default"
  std::filesystem::path config_file; // empty when none was read
  log::Format log_format = log::Format::text;
  bool color = true;
  WorkerSettings workers;
  // How BF16 weights multiply activations on the CPU, "fp32" or "bf16", where a command's
  // --activations is not given (runtime/activation_precision.hpp).
  std::string activations = "fp32";
};

// What the command line said; unset fields defer to lower layers.
struct SettingsOverrides {
  std::optional<std::filesystem::path> archive;
  std::optional<std::filesystem::path> config_file;
  std::optional<log::Format> log_format;
  bool no_color = false;
};

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_environment();

// Resolves settings; a bad config file is an InputError with file:line:col.
Settings resolve_settings(const SettingsOverrides& cli, const EnvLookup& env = process_environment());

// The settings as JSON (recorded as part of every run's resolved config).
nlohmann::json settings_json(const Settings& settings);

// The schema of the config file, for validation and for the man page.
const config::Schema& settings_schema();

} // namespace optkit
