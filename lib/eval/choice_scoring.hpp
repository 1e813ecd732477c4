// A multiple-choice suite's loglikelihoods scored as lm-eval scores them: acc (the most likely
// choice is the correct one), acc_norm (likelihood per character of the choice, Python's len),
// acc_bytes (per UTF-8 byte), and TruthfulQA's mc2 (the normalized probability mass of the true
// choices, named acc as lm-eval names it) — per item, so that paired statistics can compare runs;
// with a breakdown field, each metric again per value and per group of values (MMLU's subjects
// and subject groups, weighted by size).
#pragma once

#include "eval/choice_items.hpp"
#include "eval/task_scoring.hpp"
#include "eval/task_suite.hpp"

#include <vector>

namespace optkit::eval {

// `loglikelihoods`: one per request, items' requests in order.
SuiteScores score_multiple_choice(const TaskSuite& suite, const std::vector<ChoiceItem>& items,
                                  const std::vector<double>& loglikelihoods);

// Python's len() of a UTF-8 string: its code points.
std::size_t code_points(const std::string& text);

} // namespace optkit::eval
