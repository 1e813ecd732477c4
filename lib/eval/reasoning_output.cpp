#include "eval/reasoning_output.hpp"

namespace optkit::eval {

std::optional<std::string>
reasoning_end_marker(const std::string& chat_template_text) {
  for (const char* marker : {"</think>", "</thinking>", "</reasoning>"})
    if (chat_template_text.find(marker) != std::string::npos)
      return std::string(marker);
  return std::nullopt;
}

ReasoningSplit
strip_reasoning(const std::vector<std::string>& responses, const std::string& marker) {
  ReasoningSplit out;
  out.answers.reserve(responses.size());
  for (const auto& r : responses) {
    const auto at = r.rfind(marker);
    if (at == std::string::npos) {
      out.answers.push_back(r);
      ++out.unclosed;
    } else {
      out.answers.push_back(r.substr(at + marker.size()));
    }
  }
  return out;
}

} // namespace optkit::eval
