// JSON lines files bench reads (request traces, empirical length files): each non-blank line one
// JSON object, errors as "file:line: what was expected".
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <string>

namespace optkit::bench {

// Calls `row(object, line_number)` for each non-blank line; InputError "source:N: not a JSON
// object (expected EXPECTED)" for a line that is not one. `row` may throw its own errors.
void for_each_json_line(const std::string& text, const std::string& source, const std::string& expected,
                        const std::function<void(const nlohmann::json&, std::size_t)>& row);

} // namespace optkit::bench
