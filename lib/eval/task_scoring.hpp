// Scores one suite's responses into lm-eval's metrics, keeping every item's outcome: exact_match
// per filter pipeline (GSM8K's strict-match and flexible-extract), IFEval's prompt- and
// instruction-level strict and loose accuracy, Do-Not-Answer's harmless and refusal rates. The
// per-item outcomes are what paired statistics against a baseline run are computed from.
#pragma once

#include "eval/perplexity.hpp"
#include "eval/refusal_classifier.hpp"
#include "eval/task_prompts.hpp"
#include "eval/task_suite.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace optkit::eval {

struct MetricScores {
  std::string name;                    // "exact_match,strict-match", "prompt_level_strict_acc", "harmless_rate", ...
  std::vector<double> items;           // one score per item (per instruction for IFEval's inst-level metrics)
  bool reports_stderr = true;          // lm-eval reports N/A for IFEval's inst-level aggregation
  std::optional<double> pooled_stderr; // a group's, pooled from its members' as lm-eval pools them
  double mean() const;
  double stderr_value() const; // pooled_stderr, else lm-eval's stderr of the items' mean
};

struct ItemOutcome {
  std::size_t index = 0;
  std::string response;
  nlohmann::json answers; // filter name → extracted answer (exact_match); action/verdict (do_not_answer)
  nlohmann::json scores;  // metric → score, or a list of scores for inst-level metrics
};

struct SuiteScores {
  std::string suite;
  std::vector<MetricScores> metrics;
  std::vector<ItemOutcome> items;
  nlohmann::json details; // do_not_answer: the action histogram and the classifier used
};

// `judged`: Do-Not-Answer labels from --judge, one per item; empty: the offline classifier.
SuiteScores score_suite(const TaskSuite& suite, const std::vector<TaskItem>& items,
                        const std::vector<std::string>& responses, const std::vector<SafetyLabel>& judged = {});

// A perplexity suite's result as scores: one item per window (nll, and kl against a base), and
// the corpus figures perplexity, bits_per_byte (and top1_agreement) as single values.
SuiteScores score_perplexity(const std::string& suite, const PerplexityResult& result);

// The metric vectors back from per-item outcomes (an archived run's items file), items in order.
std::vector<MetricScores> metrics_from_items(const std::vector<ItemOutcome>& items);

nlohmann::json to_json(const ItemOutcome& item);
ItemOutcome item_from_json(const nlohmann::json& json); // InputError naming the missing field

} // namespace optkit::eval
