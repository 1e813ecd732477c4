#include "core/input_file.hpp"

#include "core/error.hpp"

#include <fstream>
#include <sstream>

namespace optkit {

std::string
read_input_file(const std::filesystem::path& path, const std::string& hint) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InputError(path.string() + ": cannot open" + (hint.empty() ? "" : " (" + hint + ")"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json
read_json_file(const std::filesystem::path& path, const std::string& hint) {
  const std::string text = read_input_file(path, hint);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path.string() + ": not valid JSON: " + e.what());
  }
}

} // namespace optkit
