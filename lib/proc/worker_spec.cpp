#include "proc/worker_spec.hpp"

#include "core/atomic_file.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <fstream>
#include <sys/resource.h>

namespace optkit::proc {

nlohmann::json
to_json(const WorkerSpec& spec) {
  return {{"run_id", spec.run_id},
          {"trial_id", spec.trial_id},
          {"trial_index", spec.trial_index},
          {"attempt", spec.attempt},
          {"archive", spec.archive},
          {"result_path", spec.result_path.string()},
          {"gpu", spec.gpu ? nlohmann::json(*spec.gpu) : nlohmann::json(nullptr)},
          {"payload", spec.payload}};
}

namespace {

// nlohmann converts a float to an integer with a plain cast (undefined beyond the range), so ids
// must be JSON integers that fit.
std::int64_t
integer_field(const nlohmann::json& doc, const char* key, std::int64_t maximum = INT64_MAX) {
  const auto& value = doc.at(key);
  const bool fits = value.is_number_unsigned() ? value.get<std::uint64_t>() <= std::uint64_t(maximum)
                                               : value.is_number_integer() && value.get<std::int64_t>() <= maximum;
  if (!fits)
    throw InputError(fmt::format("\"{}\" must be an integer up to {}, got {}", key, maximum, value.dump()));
  return value.get<std::int64_t>();
}

} // namespace

WorkerSpec
read_worker_spec(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) {
    throw InputError(fmt::format("--worker {}: cannot read the worker spec", file.string()));
  }
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    throw InputError(
        fmt::format("--worker {}: not a JSON object; worker specs are written by optkit itself", file.string()));
  }
  WorkerSpec spec;
  try {
    spec.run_id = integer_field(doc, "run_id");
    spec.trial_id = integer_field(doc, "trial_id");
    spec.trial_index = integer_field(doc, "trial_index");
    spec.attempt = integer_field(doc, "attempt");
    spec.archive = doc.at("archive").get<std::string>();
    spec.result_path = doc.at("result_path").get<std::string>();
    if (!doc.at("gpu").is_null()) {
      spec.gpu = int(integer_field(doc, "gpu", INT32_MAX));
    }
    spec.payload = doc.at("payload");
  } catch (const std::exception& e) { // nlohmann's errors and integer_field's alike
    throw InputError(fmt::format("--worker {}: malformed worker spec: {}", file.string(), e.what()));
  }
  return spec;
}

void
write_worker_result(const WorkerSpec& spec, const nlohmann::json& result) {
  auto with_peak = result;
  if (with_peak.is_object()) {
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage); // ru_maxrss: KiB on Linux
    with_peak[kPeakRssField] = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
  }
  write_file_atomic(spec.result_path, with_peak.dump(2) + "\n");
}

namespace {

std::filesystem::path
progress_path(const std::filesystem::path& result_path) {
  auto path = result_path;
  path += ".progress";
  return path;
}

} // namespace

void
write_worker_progress(const WorkerSpec& spec, const std::string& line) {
  write_file_atomic(progress_path(spec.result_path), line);
}

std::string
read_worker_progress(const std::filesystem::path& result_path) {
  std::ifstream in(progress_path(result_path));
  std::string line;
  std::getline(in, line);
  return line;
}

} // namespace optkit::proc
