// Reading user-supplied files whole, with the one-line errors optkit promises: the path, what
// went wrong and (when given) a hint for the fix. Throws InputError.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace optkit {

// "<path>: cannot open (<hint>)" when unreadable.
std::string read_input_file(const std::filesystem::path& path, const std::string& hint = "");
// As above, then "<path>: not valid JSON: <parser message>" when it does not parse.
nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& hint = "");

} // namespace optkit
