// Turns a suite's documents into the requests lm-eval would send (its Task.fewshot_context): the
// system prompt (--system-instruction, then the description, joined by fewshot_delimiter), few-shot
// exemplars (doc_to_text + target_delimiter + doc_to_target + fewshot_delimiter each) and
// doc_to_text, as one text for completions; as chat messages for a chat suite or
// --apply-chat-template — the system prompt as the system message, the exemplars as one user
// message with the question appended to it, or with as_multiturn one user/assistant turn per
// exemplar and the question as the last user turn — which --apply-chat-template renders with the
// model's chat template (generation prompt added) into the completions prompt.
#pragma once

#include "eval/task_documents.hpp"
#include "eval/task_suite.hpp"
#include "model/chat_template.hpp"

#include <optional>

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

// lm-eval's --system_instruction and --apply_chat_template (with a completions suite, the model's
// chat template renders the messages into the prompt).
struct PromptOptions {
  std::optional<std::string> system_instruction;
  const model::ChatTemplate* chat_template = nullptr;
};

// lm-eval's system prompt: the instruction and the description joined by fewshot_delimiter.
std::string system_prompt(const TaskSuite& suite, const std::optional<std::string>& instruction,
                          const std::string& description);

// Throws InputError naming the suite and document when a template fails to render.
std::vector<TaskItem> build_task_items(const TaskSuite& suite, const std::vector<Document>& docs,
                                       const std::vector<Document>& fewshot, const PromptOptions& options = {});

// The request body (without "model") for an item: prompt or messages, max_tokens, temperature,
// stop, seed.
nlohmann::json request_body(const TaskSuite& suite, const TaskItem& item);

} // namespace optkit::eval
