// Small helpers the tokenizer.json component readers share.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace optkit::model::tokenizer_json {

// The "type" of a component object ("" when it has none).
std::string type_of(const nlohmann::json& node);

// The steps of a component: none for null, the members of a "Sequence" (under `sequence_key`,
// recursively flattened), else the node itself. References into the document.
std::vector<std::reference_wrapper<const nlohmann::json>> steps(const nlohmann::json& node, const char* sequence_key);

// A Split/Replace "pattern": {"String": s} or {"Regex": r}. Sets `is_regex`; throws InputError
// naming `what` when it is neither.
std::string pattern_text(const nlohmann::json& pattern, const std::string& what, bool& is_regex);

} // namespace optkit::model::tokenizer_json
