#include "bench/json_lines.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <sstream>

namespace optkit::bench {

void
for_each_json_line(const std::string& text, const std::string& source, const std::string& expected,
                   const std::function<void(const nlohmann::json&, std::size_t)>& row) {
  std::istringstream in(text);
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    const auto object = nlohmann::json::parse(line, nullptr, false);
    if (object.is_discarded() || !object.is_object())
      throw InputError(fmt::format("{}:{}: not a JSON object (expected {})", source, number, expected));
    row(object, number);
  }
}

} // namespace optkit::bench
