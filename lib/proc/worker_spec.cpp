#include "proc/worker_spec.hpp"

#include "core/atomic_file.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

#include <fstream>

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
    spec.run_id = doc.at("run_id").get<std::int64_t>();
    spec.trial_id = doc.at("trial_id").get<std::int64_t>();
    spec.trial_index = doc.at("trial_index").get<std::int64_t>();
    spec.attempt = doc.at("attempt").get<std::int64_t>();
    spec.archive = doc.at("archive").get<std::string>();
    spec.result_path = doc.at("result_path").get<std::string>();
    if (!doc.at("gpu").is_null()) {
      spec.gpu = doc.at("gpu").get<int>();
    }
    spec.payload = doc.at("payload");
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("--worker {}: malformed worker spec: {}", file.string(), e.what()));
  }
  return spec;
}

void
write_worker_result(const WorkerSpec& spec, const nlohmann::json& result) {
  write_file_atomic(spec.result_path, result.dump(2) + "\n");
}

} // namespace optkit::proc
