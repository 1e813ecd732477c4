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
