// JSON on the wire: request bodies parsed in time linear in their size. nlohmann's own parser inserts each
// key into an ordered_json object with a search of the keys before it, so an object of n keys takes
// n² / 2 comparisons (100,000 keys: 14 s, with the io thread blocked). This parser appends keys and
// finds a repeated one through a hash index, keeps the order the client wrote (chat templates
// render tools and arguments in that order) and caps nesting and keys per object.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace optkit::http {

struct JsonBodyLimits {
  std::size_t max_depth = 64;              // nested objects and arrays
  std::size_t max_keys_per_object = 10000; // every field a request names is looked up in its object
};

// Why a body was refused: not JSON, or past a limit. The message is fit for a 400.
class JsonBodyError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Parses `text`; a key given twice keeps its last value, as nlohmann and Python's json do.
nlohmann::ordered_json parse_json_body(std::string_view text, const JsonBodyLimits& limits = {});

// The text of a response: bytes that are not UTF-8 (echoed from a request, or text cut inside a
// character) become U+FFFD instead of an exception.
template <class Json>
std::string
dump_json(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

} // namespace optkit::http
