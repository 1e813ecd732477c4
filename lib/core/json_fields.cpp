#include "core/json_fields.hpp"

#include <string_view>

namespace optkit {

std::string
describe_json_error(const std::string& source, const nlohmann::json::exception& error) {
  // what() is "[json.exception.type_error.302] (/a/b) type must be ..." with diagnostics on.
  std::string_view text = error.what();
  if (text.starts_with("[json.exception.")) {
    const auto close = text.find("] ");
    if (close != std::string_view::npos)
      text.remove_prefix(close + 2);
  }
  std::string field;
  if (text.starts_with("(")) {
    const auto close = text.find(") ");
    if (close != std::string_view::npos) {
      field = std::string(text.substr(1, close - 1));
      text.remove_prefix(close + 2);
    }
  }
  if (field.empty())
    return source + ": " + std::string(text);
  return source + ": field " + field + ": " + std::string(text);
}

} // namespace optkit
