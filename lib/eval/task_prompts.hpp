// Turns a suite's documents into the requests lm-eval would send: description + few-shot
// exemplars (doc_to_text + target_delimiter + doc_to_target, joined by fewshot_delimiter) +
// doc_to_text for completions; for chat, one user message — or, with as_multiturn, one
// user/assistant turn per exemplar — and the description as the system message.
#pragma once

#include "eval/task_documents.hpp"
#include "eval/task_suite.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace optkit::eval {

struct TaskItem {
  std::size_t index = 0;   // the document's position in the data file
  std::string prompt;      // completions: the whole prompt text
  nlohmann::json messages; // chat: [{role, content}, ...]
  std::string target;      // doc_to_target (exact_match's reference)
  Document doc;            // the document itself (IFEval's kwargs, Do-Not-Answer's question)
};

// Throws InputError naming the suite and document when a template fails to render.
std::vector<TaskItem> build_task_items(const TaskSuite& suite, const std::vector<Document>& docs,
                                       const std::vector<Document>& fewshot);

// The request body (without "model") for an item: prompt or messages, max_tokens, temperature,
// stop, seed.
nlohmann::json request_body(const TaskSuite& suite, const TaskItem& item);

} // namespace optkit::eval
