// `optkit doctor`: checks that this installation can do real work — the archive opens and is
// sound, the bundled data is found, the config file is valid, a worker child starts and reports
// back, BLAS computes correctly, and which CUDA devices are usable (running the first kernel on
// each). Every figure is measured, recorded as metrics of the doctor's run. With --model DIR it also
// reports whether a model folder is understood (config, tokenizer, special tokens, chat template).
#pragma once

#include "archive/run_context.hpp"
#include "core/settings.hpp"
#include "core/table.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace optkit::doctor {

enum class CheckStatus { ok, warn, fail };

struct Check {
  std::string name;
  CheckStatus status = CheckStatus::ok;
  std::string detail;
};

struct Report {
  std::vector<Check> checks;
  nlohmann::json probes; // the worker child's measurements
  std::size_t failures() const;
};

// The probing worker child runs under context.timeout_s. With `model_dir`, the model folder's
// checks (model_check.hpp) are added.
Report run_doctor(const Settings& settings, const archive::RunContext& context,
                  const std::optional<std::filesystem::path>& model_dir = std::nullopt);

Table report_table(const Report& report);
std::string to_string(CheckStatus status);

} // namespace optkit::doctor
