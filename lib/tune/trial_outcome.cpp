#include "core/error.hpp"
#include "core/json_fields.hpp"
#include "tune/trial_evaluator.hpp"

#include <cmath>

namespace optkit::tune {

std::string
to_string(TrialStatus status) {
  switch (status) {
  case TrialStatus::measured:
    return "measured";
  case TrialStatus::invalid:
    return "invalid";
  case TrialStatus::launch_failed:
    return "launch_failed";
  case TrialStatus::crashed:
    return "crashed";
  case TrialStatus::timed_out:
    return "timed_out";
  case TrialStatus::interrupted:
    return "interrupted";
  }
  return "?";
}

TrialStatus
parse_trial_status(const std::string& text) {
  if (const auto status = enum_named(text, kTrialStatuses))
    return *status;
  throw InputError("unknown trial status '" + text + "' in the archive");
}

std::string
to_string(StudyPhase phase) {
  switch (phase) {
  case StudyPhase::baseline:
    return "baseline";
  case StudyPhase::search:
    return "search";
  case StudyPhase::replicate:
    break;
  }
  return "replicate";
}

StudyPhase
parse_study_phase(const std::string& text) {
  if (const auto phase = enum_named(text, kStudyPhases))
    return *phase;
  throw InputError("unknown study phase '" + text + "' in the archive");
}

nlohmann::json
to_json(const TrialOutcome& o) {
  nlohmann::json j = {{"status", to_string(o.status)},
                      {"value", std::isfinite(o.value) ? nlohmann::json(o.value) : nlohmann::json(nullptr)},
                      {"violation", o.violation},
                      {"feasible", o.feasible()},
                      {"metrics", o.metrics}};
  if (!o.error.empty())
    j["error"] = o.error;
  if (!o.engine.is_null())
    j["engine"] = o.engine;
  if (!o.log.empty())
    j["log"] = o.log;
  return j;
}

TrialOutcome
outcome_from_json(const nlohmann::json& j) {
  TrialOutcome o;
  o.status = parse_trial_status(j.at("status").get<std::string>());
  o.value = j.at("value").is_number() ? j.at("value").get<double>() : -std::numeric_limits<double>::infinity();
  o.violation = j.value("violation", 0.0);
  o.metrics = j.value("metrics", nlohmann::json::object());
  o.error = j.value("error", "");
  o.engine = j.value("engine", nlohmann::json());
  o.log = j.value("log", "");
  return o;
}

} // namespace optkit::tune
