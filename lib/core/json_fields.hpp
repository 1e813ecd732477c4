// Reading fields out of a parsed JSON document the user supplied. nlohmann-json signals a field
// of the wrong type, a missing key or an out-of-range number with its own exceptions; a parser
// runs its reads through read_json_fields so those become the InputError optkit promises (exit 2),
// naming the file and the field's JSON pointer (the library is built with JSON_DIAGNOSTICS).
#pragma once

#include "core/error.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace optkit {

// "<source>: field /model/vocab: type must be string, but is number".
std::string describe_json_error(const std::string& source, const nlohmann::json::exception& error);

template <class Read>
auto
read_json_fields(const std::string& source, Read&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const nlohmann::json::exception& error) {
    throw InputError(describe_json_error(source, error));
  }
}

} // namespace optkit
