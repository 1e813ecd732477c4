// What measures one configuration: the simulator, or a live engine launched for the trial. An
// evaluator never throws for a bad configuration or a failed launch — it reports the failure,
// classified, so the study records it as infeasible and goes on.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>

namespace optkit::tune {

enum class TrialStatus { measured, invalid, launch_failed, crashed, timed_out, interrupted };
inline constexpr std::array kTrialStatuses{TrialStatus::measured, TrialStatus::invalid,   TrialStatus::launch_failed,
                                           TrialStatus::crashed,  TrialStatus::timed_out, TrialStatus::interrupted};
std::string to_string(TrialStatus status);
TrialStatus parse_trial_status(const std::string& text);

// Which part of a study a trial belongs to: the engine's defaults measured first, the search, or
// a re-measurement of a finalist.
enum class StudyPhase { baseline, search, replicate };
inline constexpr std::array kStudyPhases{StudyPhase::baseline, StudyPhase::search, StudyPhase::replicate};
std::string to_string(StudyPhase phase);
// InputError naming `text` when it is not a phase's name.
StudyPhase parse_study_phase(const std::string& text);

struct TrialOutcome {
  TrialStatus status = TrialStatus::measured;
  double value = -std::numeric_limits<double>::infinity(); // the objective (−inf when not measured)
  double violation = 0; // > 0: infeasible; how far (SLO overshoot share, 1 for a failed gate, 10 for a failure)
  nlohmann::json metrics = nlohmann::json::object(); // goodput, p99, certified_rate ...
  std::string error;                                 // why it failed, one line
  nlohmann::json engine;                             // what was launched and what it reported
  std::string log;                                   // the engine's log file, when one was kept

  bool feasible() const { return status == TrialStatus::measured && violation <= 0; }
};

nlohmann::json to_json(const TrialOutcome& outcome);
TrialOutcome outcome_from_json(const nlohmann::json& j);

// Where a trial runs: its folder (logs) and the GPUs its slot holds.
struct TrialContext {
  std::filesystem::path directory;
  std::string gpus; // CUDA_VISIBLE_DEVICES for the engine ("0,1"); empty: inherited
};

class TrialEvaluator {
public:
  virtual ~TrialEvaluator() = default;
  // `seed` drives the workload (the same seed gives every configuration the same requests).
  virtual TrialOutcome evaluate(const nlohmann::json& config, std::uint64_t seed, const TrialContext& context) = 0;
  // The engine's validity rules: an empty string when `config` may launch, else why not.
  virtual std::string invalid_reason(const nlohmann::json& config) const = 0;
  // The command line that deploys `config` (for --emit and the report).
  virtual std::string launch_command(const nlohmann::json& config) const = 0;
};

} // namespace optkit::tune
