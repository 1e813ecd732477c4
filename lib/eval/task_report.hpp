// How an `eval tasks` result is shown: one row per model × suite × metric (score, stderr, n,
// recovery with its interval, p-value against the baseline), the spread across trials and
// repeats, the gate's rule lines; or all of it as JSON / CSV for programs.
#pragma once

#include "core/table.hpp"
#include "eval/task_run.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace optkit::eval {

Table task_score_table(const TaskEvalResult& result);
Table trial_spread_table(const TaskEvalResult& result); // empty with one candidate
Table repeat_table(const TaskEvalResult& result);       // empty without --repeat
// What people read after the score table: the spread across trials and repeats, answers that
// never closed their reasoning, and every gate rule's line.
std::string task_report_notes(const TaskEvalResult& result, bool color);
nlohmann::json to_json(const TaskEvalResult& result);
// One line per failed rule (each candidate's), for the exit-1 message.
std::string failed_rules_text(const TaskEvalResult& result);

} // namespace optkit::eval
