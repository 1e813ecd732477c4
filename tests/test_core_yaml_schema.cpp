#include "core/yaml_schema.hpp"

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

using namespace optkit;
using namespace optkit::config;

namespace {

const Schema&
recipe_like_schema() {
  static const Schema schema = [] {
    auto weights = std::make_shared<Schema>();
    weights->name = "weights";
    weights->fields = {
        Field{.name = "bits",
              .type = Type::integer,
              .required = true,
              .help = "bits per weight",
              .minimum = 2,
              .maximum = 8},
        Field{.name = "strategy", .type = Type::string, .choices = {"channel", "group", "tensor"}},
        Field{.name = "symmetric", .type = Type::boolean},
    };
    Schema s;
    s.name = "recipe";
    s.fields = {
        Field{.name = "name", .type = Type::string, .required = true, .help = "recipe name"},
        Field{.name = "dampening", .type = Type::number, .minimum = 0, .maximum = 1},
        Field{.name = "weights", .type = Type::object, .object = weights},
        Field{.name = "ignore",
              .type = Type::list,
              .item = std::make_shared<Field>(Field{.name = "layer", .type = Type::string})},
    };
    return s;
  }();
  return schema;
}

std::string
error_of(const std::string& yaml) {
  try {
    parse_yaml(yaml, "r.yaml", recipe_like_schema());
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

} // namespace

TEST_CASE("a valid document comes back as typed JSON") {
  const auto doc = parse_yaml("name: w4\ndampening: 0.01\nweights:\n  bits: 4\n  strategy: group\n"
                              "  symmetric: true\nignore: [lm_head, 'model.embed']\n",
                              "r.yaml", recipe_like_schema());
  CHECK(doc["name"] == "w4");
  CHECK(doc["dampening"].get<double>() == doctest::Approx(0.01));
  CHECK(doc["weights"]["bits"] == 4);
  CHECK(doc["weights"]["symmetric"] == true);
  CHECK(doc["ignore"] == nlohmann::json({"lm_head", "model.embed"}));
}

TEST_CASE("malformed YAML is reported with file:line:col") {
  CHECK(error_of("name: w4\nweights: [bits: 4\n").rfind("r.yaml:3:1: malformed YAML", 0) == 0);
  CHECK(error_of("name: a: b\n").rfind("r.yaml:1:8: malformed YAML", 0) == 0);
}

TEST_CASE("an unknown key names its location and the closest valid key") {
  CHECK(error_of("name: w4\nweights:\n  bitz: 4\n") ==
        "r.yaml:3:3: unknown key 'weights.bitz'; did you mean 'weights.bits'?");
  CHECK(error_of("name: w4\nzzzzzzzz: 1\n") ==
        "r.yaml:2:1: unknown key 'zzzzzzzz'; valid keys here: name, dampening, weights, ignore");
}

TEST_CASE("a wrong type names the key, the expected type and the value") {
  CHECK(error_of("name: w4\nweights:\n  bits: four\n") == "r.yaml:3:9: 'weights.bits' must be an integer, got 'four'");
  CHECK(error_of("name: w4\ndampening: [1]\n") == "r.yaml:2:12: 'dampening' must be a number, not a list");
  CHECK(error_of("name: w4\nweights:\n  bits: 4\n  symmetric: maybe\n") ==
        "r.yaml:4:14: 'weights.symmetric' must be true or false, got 'maybe'");
  CHECK(error_of("name: w4\nweights: 3\n") == "r.yaml:2:10: 'weights' must be a mapping of keys to values");
}

TEST_CASE("bounds, choices, missing and duplicate keys") {
  CHECK(error_of("name: w4\nweights:\n  bits: 16\n") == "r.yaml:3:9: 'weights.bits' is 16; it must be in [2, 8]");
  CHECK(error_of("name: w4\nweights:\n  bits: 4\n  strategy: grup\n") ==
        "r.yaml:4:13: 'weights.strategy' is 'grup'; expected one of channel, group, tensor (did you mean 'group'?)");
  CHECK(error_of("dampening: 0.1\n") == "r.yaml:1:1: missing required key 'name' (recipe name)");
  CHECK(error_of("name: a\nname: b\n") == "r.yaml:2:1: duplicate key 'name'; keep one of them");
  CHECK(error_of("name:\n") == "r.yaml:1:1: 'name' has no value; expected a string");
}

TEST_CASE("an empty document is an empty mapping; a required key is then missing") {
  CHECK(error_of("").find("missing required key 'name'") != std::string::npos);
}

TEST_CASE("load_yaml_file reports unreadable and oversized files by name") {
  test::ScratchDir dir;
  CHECK_THROWS_WITH(load_yaml_file(dir / "none.yaml", recipe_like_schema()),
                    doctest::Contains("none.yaml: cannot read"));
  test::write_text(dir / "big.yaml", std::string(2000, '#'));
  CHECK_THROWS_WITH(load_yaml_file(dir / "big.yaml", recipe_like_schema(), 1000), doctest::Contains("larger than the"));
  test::write_text(dir / "ok.yaml", "name: x\n");
  CHECK(load_yaml_file(dir / "ok.yaml", recipe_like_schema())["name"] == "x");
}
