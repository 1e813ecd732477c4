// Rows of the run archive as plain structs. Times are milliseconds since the Unix epoch.
#pragma once

#include "proc/trial_recorder.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace optkit::archive {

enum class RunStatus { running, succeeded, goal_not_met, failed, interrupted };
// Trials are the worker pool's attempts; the archive stores them in proc's vocabulary.
using proc::TrialEnd;
using proc::TrialStatus;

std::string to_string(RunStatus status);
using proc::to_string;
const std::vector<std::string>& run_status_names();

struct NewRun {
  std::string command; // "compress", "runs rm", ...
  nlohmann::json argv = nlohmann::json::array();
  nlohmann::json config = nlohmann::json::object();
};

struct RunRecord {
  std::int64_t id = 0;
  std::string command;
  nlohmann::json argv;
  nlohmann::json config;
  std::string version;
  std::string git_commit;
  std::string host;
  std::int64_t pid = 0;
  std::string cwd;
  std::string status; // a RunStatus name, or "abandoned" for a running row whose process is gone
  std::optional<std::int64_t> exit_code;
  std::string error;
  std::int64_t started_at = 0;
  std::optional<std::int64_t> ended_at;
};

struct TrialRecord {
  std::int64_t id = 0;
  std::int64_t run_id = 0;
  std::int64_t trial_index = 0;
  std::int64_t attempt = 1;
  nlohmann::json params;
  std::string status; // a trial status, or "abandoned" for a running trial of an abandoned run
  std::optional<std::int64_t> exit_code;
  std::optional<std::int64_t> signal;
  nlohmann::json result; // null when none
  std::string error;
  std::int64_t started_at = 0;
  std::optional<std::int64_t> ended_at;
};

struct MetricRecord {
  std::int64_t id = 0;
  std::int64_t run_id = 0;
  std::optional<std::int64_t> trial_id;
  std::string name;
  std::optional<double> value; // null when the measured value was not finite
  std::string unit;
  std::optional<std::int64_t> step;
  std::int64_t recorded_at = 0;
};

struct NewMetric {
  std::string name;
  double value = 0;
  std::string unit;
  std::optional<std::int64_t> step;
};

struct ArtifactRecord {
  std::int64_t id = 0;
  std::int64_t run_id = 0;
  std::optional<std::int64_t> trial_id;
  std::string path;
  std::string kind;
  std::string sha256;
  std::int64_t bytes = 0;
  std::int64_t recorded_at = 0;
};

struct EventRecord {
  std::int64_t id = 0;
  std::int64_t run_id = 0;
  std::optional<std::int64_t> trial_id;
  std::int64_t time = 0;
  std::string level;
  std::string kind;
  std::string message;
  nlohmann::json data;
};

struct RunDetail {
  RunRecord run;
  std::vector<TrialRecord> trials;
  std::vector<MetricRecord> metrics;
  std::vector<ArtifactRecord> artifacts;
  std::vector<EventRecord> events;
};

struct RunFilter {
  std::optional<std::string> command; // exact, or a prefix ending in '*'
  std::optional<std::string> status;
  std::optional<std::int64_t> since; // started at or after
  std::optional<std::int64_t> limit; // newest first
};

} // namespace optkit::archive
