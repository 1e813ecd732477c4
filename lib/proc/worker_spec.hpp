// The contract between a parent and an `optkit <command> --worker SPEC.json` child: the spec
// file the parent writes, and the result file the child writes back (atomically) on success.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace optkit::proc {

struct WorkerSpec {
  std::int64_t run_id = 0;
  std::int64_t trial_id = 0;
  std::int64_t trial_index = 0;
  std::int64_t attempt = 1;
  std::string archive;               // the archive the child may add metrics to
  std::filesystem::path result_path; // where the child writes its JSON result
  std::optional<int> gpu;            // the CUDA device the child was given (also CUDA_VISIBLE_DEVICES)
  nlohmann::json payload;            // what the command needs to do its work
};

nlohmann::json to_json(const WorkerSpec& spec);
// Reads a spec; InputError naming the file and the field when it is malformed.
WorkerSpec read_worker_spec(const std::filesystem::path& file);
// Called by the child when it is done: atomically writes `result` where the parent expects it,
// with the child's peak resident bytes (the kernel's ru_maxrss) added to an object as
// kPeakRssField, which the pool records as the trial's `peak_rss_bytes` metric.
inline constexpr const char* kPeakRssField = "peak_rss_bytes";
void write_worker_result(const WorkerSpec& spec, const nlohmann::json& result);

// Called by the child while it works: one line saying how far it is (e.g. "layer 5/32, about 41 min
// left"), which the parent shows beside its progress. Replaced atomically at each call.
void write_worker_progress(const WorkerSpec& spec, const std::string& line);
// The line the child last wrote for the result at `result_path` (empty: none yet).
std::string read_worker_progress(const std::filesystem::path& result_path);

} // namespace optkit::proc
