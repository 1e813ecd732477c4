// parse_json_body against nlohmann's own parser (the oracle, on bodies small enough for it), and
// its limits.
#include "http/json_body.hpp"

#include <doctest/doctest.h>

#include <random>
#include <string>

using optkit::http::JsonBodyError;
using optkit::http::JsonBodyLimits;
using optkit::http::parse_json_body;
using ordered_json = nlohmann::ordered_json;

namespace {

// A random JSON text of nested objects and arrays, keys from a small set so that some repeat.
std::string
random_body(std::mt19937& rng, int depth) {
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  switch (depth > 3 ? pick(5) : pick(7)) {
  case 0:
    return "null";
  case 1:
    return pick(2) ? "true" : "false";
  case 2:
    return std::to_string(static_cast<int>(rng()) % 1000);
  case 3:
    return "1.5e" + std::to_string(pick(20));
  case 4:
    return "\"s\\u00e9" + std::to_string(pick(100)) + "\"";
  case 5: {
    std::string out = "[";
    for (int i = 0, n = pick(4); i < n; ++i)
      out += (i ? "," : "") + random_body(rng, depth + 1);
    return out + "]";
  }
  default: {
    std::string out = "{";
    for (int i = 0, n = pick(5); i < n; ++i)
      out += (i ? ",\"k" : "\"k") + std::to_string(pick(4)) + "\":" + random_body(rng, depth + 1);
    return out + "}";
  }
  }
}

} // namespace

TEST_CASE("the same value as nlohmann's parser: key order, repeated keys (the last wins), numbers, escapes") {
  std::mt19937 rng(7);
  for (int i = 0; i < 500; ++i) {
    const std::string text = random_body(rng, 0);
    CAPTURE(text);
    const ordered_json expected = ordered_json::parse(text);
    const ordered_json got = parse_json_body(text);
    CHECK(got.dump() == expected.dump());
  }
  CHECK(parse_json_body(R"({"b":1,"a":2,"b":3})").dump() == R"({"b":3,"a":2})");
}

TEST_CASE("what is not JSON is refused with the parser's reason") {
  for (const char* text : {"", "{", "{\"a\":}", "[1,]", "{\"a\":1} x", "1E400", "\"\xff\"", "\"\\ud800\""}) {
    CAPTURE(text);
    CHECK_THROWS_AS(parse_json_body(text), JsonBodyError);
  }
  CHECK_THROWS_WITH_AS(parse_json_body("{\"a\":1"), doctest::Contains("parse error"), JsonBodyError);
}

TEST_CASE("nesting and keys per object are capped; an object of 200,000 keys at the cap parses") {
  const JsonBodyLimits limits{.max_depth = 8, .max_keys_per_object = 200'000};
  CHECK_NOTHROW(parse_json_body(std::string(8, '[') + std::string(8, ']'), limits));
  CHECK_THROWS_WITH_AS(parse_json_body(std::string(9, '[') + std::string(9, ']'), limits),
                       doctest::Contains("deeper than 8"), JsonBodyError);
  CHECK_THROWS_WITH_AS(parse_json_body(std::string(100'000, '[') + std::string(100'000, ']')),
                       doctest::Contains("deeper than 64"), JsonBodyError);
  std::string wide = "{";
  for (int i = 0; i < 200'000; ++i)
    wide += (i ? ",\"" : "\"") + std::to_string(i) + "\":" + std::to_string(i);
  const ordered_json parsed = parse_json_body(wide + "}", limits);
  CHECK(parsed.size() == 200'000);
  CHECK(parsed.begin().key() == "0");
  CHECK(parsed.back() == 199'999);
  CHECK_THROWS_WITH_AS(parse_json_body(wide + ",\"x\":1}", limits), doctest::Contains("more than 200000 keys"),
                       JsonBodyError);
  CHECK_THROWS_WITH_AS(parse_json_body(wide + "}"), doctest::Contains("more than 10000 keys"), JsonBodyError);
}
