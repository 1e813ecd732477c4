// Where the worker pool reports what happened to each attempt: a trial row per attempt, warning
// events, the attempt's log as an artifact. The run archive implements it; the pool itself knows
// no database, so a process supervisor exists without SQLite (and tests can record in memory).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace optkit::proc {

enum class TrialStatus { running, succeeded, failed, timed_out, interrupted };

// "running", "succeeded", "failed", "timed_out", "interrupted".
std::string to_string(TrialStatus status);

// How one attempt ended.
struct TrialEnd {
  TrialStatus status = TrialStatus::succeeded;
  std::optional<int> exit_code;
  std::optional<int> signal;
  nlohmann::json result; // null when none
  std::string error;
  std::optional<std::uint64_t> peak_rss_bytes; // the child's, when it reported it (a result was written)
};

class TrialRecorder {
public:
  virtual ~TrialRecorder() = default;

  // Where a child opens the same record to add its own metrics (handed to it in its spec).
  virtual const std::filesystem::path& path() const = 0;
  // Returns the new trial's id.
  virtual std::int64_t begin_trial(std::int64_t run_id, std::int64_t trial_index, std::int64_t attempt,
                                   const nlohmann::json& params) = 0;
  virtual void finish_trial(std::int64_t trial_id, const TrialEnd& end) = 0;
  virtual std::int64_t add_artifact(std::int64_t run_id, std::optional<std::int64_t> trial_id,
                                    const std::filesystem::path& file, const std::string& kind) = 0;
  virtual void add_event(std::int64_t run_id, std::optional<std::int64_t> trial_id, const std::string& level,
                         const std::string& kind, const std::string& message, const nlohmann::json& data = nullptr) = 0;
};

} // namespace optkit::proc
