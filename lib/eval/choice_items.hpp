// A multiple-choice suite's documents as the loglikelihood requests lm-eval builds from them: the
// context (description, few-shot exemplars, doc_to_text) and one continuation per choice
// (target_delimiter + choice) — or, in multiple-input mode (doc_to_text renders an index, as
// Winogrande's does), one context per choice and the target as every continuation.
#pragma once

#include "eval/task_documents.hpp"
#include "eval/task_prompts.hpp"
#include "eval/task_suite.hpp"

#include <string>
#include <vector>

namespace optkit::eval {

struct ChoiceRequest {
  std::string context, continuation;
};

struct ChoiceItem {
  std::size_t index = 0;               // the document's position in the data file
  std::vector<std::string> choices;    // as doc_to_choice gives them (acc_norm divides by their length)
  std::size_t gold = 0;                // the correct choice
  std::vector<ChoiceRequest> requests; // one per choice
  std::vector<int> mc2_labels;         // mc2: 1 for a true choice
  std::string breakdown;               // the breakdown field's value; empty without one
  bool multiple_input = false;
};

// InputError naming the suite, the document and the fix: a template that fails, choices that are
// not a list of strings, a target that is out of range or not among the choices. With a chat
// template (--apply-chat-template), the context is the rendered conversation up to the question
// (system prompt, exemplars as task_prompts.hpp says) and each continuation the bare choice, as
// lm-eval builds them.
std::vector<ChoiceItem> build_choice_items(const TaskSuite& suite, const std::vector<Document>& docs,
                                           const std::vector<Document>& fewshot, const PromptOptions& options = {});

} // namespace optkit::eval
