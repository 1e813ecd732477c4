#include "core/json_fields.hpp"

#include <doctest/doctest.h>

using namespace optkit;

TEST_CASE("JSON-library errors in a parser become InputError naming the file and the field") {
  const auto doc = nlohmann::json::parse(R"({"model": {"layers": [1, "two"]}})");
  CHECK_THROWS_WITH_AS(read_json_fields("c.json", [&] { return doc.at("model").at("layers").at(1).get<int>(); }),
                       "c.json: field /model/layers/1: type must be number, but is string", InputError);
  CHECK_THROWS_WITH_AS(read_json_fields("c.json", [&] { return doc.at("model").at("heads").get<int>(); }),
                       doctest::Contains("c.json: field /model: key 'heads' not found"), InputError);
  CHECK(read_json_fields("c.json", [&] { return doc.at("model").at("layers").at(0).get<int>(); }) == 1);
}

TEST_CASE("an error without a field position still names the file") {
  CHECK_THROWS_WITH_AS(read_json_fields("c.json", [] { return nlohmann::json(3).at("x").get<int>(); }),
                       "c.json: cannot use at() with number", InputError);
}

TEST_CASE("integer fields: in range, or an integral float; never a cast of an out-of-range number") {
  const auto doc = nlohmann::json::parse(R"({"a": 3, "b": 3.0, "c": 6.47e34, "d": 2.5, "e": -1, "f": 4294967296,
                                            "g": "3", "h": 18446744073709551615, "i": -2147483648})");
  const auto read = [&](const char* key) {
    return read_json_fields("j.json", [&] { return json_integer<int>(doc.at(key)); });
  };
  CHECK(read("a") == 3);
  CHECK(read("b") == 3);
  CHECK(read("e") == -1);
  CHECK(read("i") == -2147483648);
  CHECK_THROWS_WITH_AS(read("c"), doctest::Contains("j.json: field /c: number 6.47e+34 is not an integer from"),
                       InputError);
  CHECK_THROWS_WITH_AS(read("d"), doctest::Contains("field /d: number 2.5 is not an integer"), InputError);
  CHECK_THROWS_WITH_AS(read("f"), doctest::Contains("field /f"), InputError); // past int, not wrapped
  CHECK_THROWS_WITH_AS(read("g"), doctest::Contains("field /g: type must be number, but is string"), InputError);
  CHECK_THROWS_AS(read("h"), InputError);
  CHECK(json_integer<std::uint64_t>(doc.at("h")) == 18446744073709551615ULL);
  CHECK_THROWS_AS(json_integer<std::uint64_t>(doc.at("e")), nlohmann::json::out_of_range);
  CHECK_THROWS_AS(json_integer<std::uint64_t>(nlohmann::json(1.8446744073709552e19)), nlohmann::json::out_of_range);
}
