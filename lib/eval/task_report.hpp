// How an `eval tasks` result is shown: one row per model × suite × metric (score, stderr, n,
// recovery with its interval, p-value against the baseline), the spread across trials and
// repeats, the gate's rule lines; or all of it as JSON / CSV for programs.
#pragma once

#include "core/table.hpp"
#include "eval/task_run.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace optkit::eval {

Table task_score_table(const TaskEvalResult& result);
Table trial_spread_table(const TaskEvalResult& result); // empty with one candidate
Table repeat_table(const TaskEvalResult& result);       // empty without --repeat
// What people read after the score table: the spread across trials and repeats, answers that
// never closed their reasoning, and every gate rule's line.
std::string task_report_notes(const TaskEvalResult& result, bool color);
nlohmann::json to_json(const TaskEvalResult& result);
// A gated candidate as the first candidate of an `eval tasks` result says it, read back by what
// chains on the gate (flow): the verdict, each rule's outcome, and each metric's score beside the
// baseline's.
struct ScoreVersusBaseline {
  std::string suite, metric;
  double score = 0, baseline = 0;
  std::optional<double> recovery, recovery_low, recovery_high; // with its 95 % interval
};
struct GateReport {
  bool passed = false;
  std::vector<RuleOutcome> rules;
  std::vector<ScoreVersusBaseline> scores;
};
// None when the result's first candidate was not gated; InputError naming `source` and the field
// when `result` is not an `eval tasks` result.
std::optional<GateReport> gate_report_from_json(const nlohmann::json& result, const std::string& source);

// One line per failed rule (each candidate's), for the exit-1 message.
std::string failed_rules_text(const TaskEvalResult& result);

} // namespace optkit::eval
