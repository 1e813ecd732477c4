// Reasoning models' answers: everything up to the end-of-thinking marker ("</think>" for Qwen3,
// DeepSeek-R1 and their kin) is the model's reasoning, not its answer, and goes before filters and
// scoring — split as lm-eval splits it (the text after the marker's last occurrence). An answer
// that never wrote the marker never closed its reasoning: it is scored as it is, and counted.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace optkit::eval {

// The marker a chat template names ("</think>"), if it names one.
std::optional<std::string> reasoning_end_marker(const std::string& chat_template_text);

struct ReasoningSplit {
  std::vector<std::string> answers; // the responses after the marker (whole where it is missing)
  std::size_t unclosed = 0;         // responses without the marker
};

ReasoningSplit strip_reasoning(const std::vector<std::string>& responses, const std::string& marker);

} // namespace optkit::eval
