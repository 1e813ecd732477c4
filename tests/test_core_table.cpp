#include "core/table.hpp"

#include "core/error.hpp"

#include <doctest/doctest.h>

using namespace optkit;

TEST_CASE("one table renders as aligned text, CSV and JSON") {
  Table t({"id", "name", "value"});
  t.add_row({1, "alpha", 0.5});
  t.add_row({22, "b,c", nullptr});
  CHECK(t.render_text(false) == "id  name   value\n1   alpha  0.5\n22  b,c    -\n");
  CHECK(t.render_csv() == "id,name,value\n1,alpha,0.5\n22,\"b,c\",\n");
  CHECK(t.to_json() ==
        nlohmann::json::parse(R"([{"id":1,"name":"alpha","value":0.5},{"id":22,"name":"b,c","value":null}])"));
  CHECK(t.render(OutputFormat::json, false) == t.to_json().dump(2) + "\n");
}

TEST_CASE("an empty table is a header, an empty CSV body and []") {
  Table t({"a"});
  CHECK(t.render_text(false) == "a\n");
  CHECK(t.render_csv() == "a\n");
  CHECK(t.to_json() == nlohmann::json::array());
}

TEST_CASE("output formats are parsed strictly") {
  CHECK(parse_output_format("csv") == OutputFormat::csv);
  CHECK_THROWS_WITH_AS(parse_output_format("xml"), "--format xml: expected table, json or csv", InputError);
}
