#include "model/tokenizer_json.hpp"

#include "core/error.hpp"

namespace optkit::model::tokenizer_json {

std::string
type_of(const nlohmann::json& node) {
  return node.is_object() && node.contains("type") && node["type"].is_string() ? node["type"].get<std::string>() : "";
}

std::vector<std::reference_wrapper<const nlohmann::json>>
steps(const nlohmann::json& node, const char* sequence_key) {
  std::vector<std::reference_wrapper<const nlohmann::json>> out;
  if (node.is_null())
    return out;
  if (type_of(node) == "Sequence") {
    if (!node.contains(sequence_key) || !node[sequence_key].is_array())
      throw InputError(std::string("a Sequence needs a '") + sequence_key + "' array");
    for (const auto& step : node[sequence_key])
      for (const auto& inner : steps(step, sequence_key))
        out.push_back(inner);
    return out;
  }
  out.push_back(std::cref(node));
  return out;
}

std::string
pattern_text(const nlohmann::json& pattern, const std::string& what, bool& is_regex) {
  if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
    is_regex = true;
    return pattern["Regex"].get<std::string>();
  }
  if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string()) {
    is_regex = false;
    return pattern["String"].get<std::string>();
  }
  throw InputError(what + ": 'pattern' must be {\"String\": ...} or {\"Regex\": ...}");
}

} // namespace optkit::model::tokenizer_json
