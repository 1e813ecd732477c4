// Chat templates executed: loading from tokenizer_config.json (string or named list) or
// chat_template.jinja, the context transformers passes, and errors with the template's position.
// (Byte-identity with @huggingface/jinja on real templates: tests/conformance/chat_template_conformance.mjs.)
#include "core/error.hpp"
#include "model/chat_template.hpp"
#include "support/test_support.hpp"

#include <doctest/doctest.h>

using namespace optkit;
using namespace optkit::model;
using Chat = std::vector<ChatMessage>;

TEST_CASE("the test models' template renders a Llama-3 prompt with the BOS token from tokenizer_config.json") {
  const auto t = load_chat_template(test::testdata_dir() / "models" / "tiny-base");
  const std::vector<ChatMessage> chat{{"system", "Be brief."}, {"user", "Hi"}};
  CHECK(render_chat(t, chat, true) ==
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST_CASE("a list of named templates, chat_template.jinja, and a folder with none") {
  test::ScratchDir dir;
  test::write_text(dir / "tokenizer_config.json",
                   R"({"bos_token": {"content": "<s>"}, "chat_template": [
                        {"name": "default", "template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"},
                        {"name": "tool_use", "template": "{{ tools | length }} tools"}]})");
  auto t = load_chat_template(dir.path());
  CHECK(t.names == std::vector<std::string>{"default", "tool_use"});
  CHECK(render_chat(t, Chat{{"user", "a"}, {"assistant", "b"}}, false) == "<s>ab");
  t = load_chat_template(dir.path(), "tool_use");
  CHECK(render_chat(t, nlohmann::ordered_json::array(), false, nlohmann::ordered_json::array({1, 2})) == "2 tools");
  CHECK_THROWS_WITH_AS(load_chat_template(dir.path(), "rag"), doctest::Contains("no template named 'rag'"), InputError);

  test::ScratchDir jinja_dir;
  test::write_text(jinja_dir / "chat_template.jinja", "{{ messages[0].role }}|{{ add_generation_prompt }}\n");
  CHECK(render_chat(load_chat_template(jinja_dir.path()), Chat{{"user", "x"}}, true) == "user|true");

  test::ScratchDir empty;
  CHECK_THROWS_WITH_AS(load_chat_template(empty.path()), doctest::Contains("has no chat template"), InputError);
}

TEST_CASE("template errors name the line and column; raise_exception reaches the caller") {
  CHECK_THROWS_WITH_AS(parse_chat_template("ok\n{% for m in messages %}\n{{ m.content ", "t.jinja"),
                       doctest::Contains("t.jinja:3:"), InputError);
  CHECK_THROWS_WITH_AS(parse_chat_template("{% include 'other.jinja' %}", "t.jinja"),
                       doctest::Contains("t.jinja:1:4: '{% include %}' is not supported"), InputError);
  const auto t = parse_chat_template(
      "{% if messages[0].role != 'user' %}{{ raise_exception('first message must be user') }}{% endif %}", "t.jinja");
  CHECK_THROWS_WITH_AS(render_chat(t, Chat{{"assistant", "x"}}, false), doctest::Contains("first message must be user"),
                       InputError);
}

TEST_CASE("hostile templates are bounded: deep nesting, endless loops, runaway recursion, huge output") {
  std::string deep;
  for (int i = 0; i < 5000; ++i)
    deep += "(";
  CHECK_THROWS_WITH_AS(parse_chat_template("{{ " + deep + " }}", "t.jinja"), doctest::Contains("nesting deeper"),
                       InputError);
  const auto loop = parse_chat_template(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "t.jinja");
  // (a small step budget keeps the test quick under sanitizers; the default is the same check)
  CHECK_THROWS_WITH_AS(loop.jinja.render(nlohmann::ordered_json::object(), 100'000), doctest::Contains("steps"),
                       InputError);
  const auto recursion = parse_chat_template("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "t.jinja");
  CHECK_THROWS_WITH_AS(render_chat(recursion, Chat{}, false), doctest::Contains("recursed deeper"), InputError);
  const auto big = parse_chat_template(
      "{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
      "{{ ns.s }}",
      "t.jinja");
  CHECK_THROWS_AS(render_chat(big, Chat{}, false), InputError);
  // tojson's indent: negative is an error, as in @huggingface/jinja (fuzz_chat_template found
  // tojson(indent=-4) ending the process with std::length_error), and so is an absurd width.
  for (const std::string width : {"-4", "1000000000"}) {
    const auto indented = parse_chat_template("{{ [1, [2]] | tojson(indent=" + width + ") }}", "t.jinja");
    CHECK_THROWS_WITH_AS(render_chat(indented, Chat{}, false),
                         doctest::Contains(("t.jinja:1:13: tojson indent " + width + " is not from 0 to 1024").c_str()),
                         InputError);
  }
  CHECK(render_chat(parse_chat_template("{{ [1, [2]] | tojson(indent=2) }}", "t.jinja"), Chat{}, false) ==
        "[\n  1,\n  [\n    2\n  ]\n]");
  // A value that would contain itself is refused where it would be stored (fuzz_chat_template found
  // `{% set ns.count = ns %}{{ ns }}` overflowing the stack); so is nesting past the value depth.
  const auto self_attribute =
      parse_chat_template("{% set ns = namespace(n=0) %}{% set ns.n = ns %}{{ ns }}", "t.jinja");
  CHECK_THROWS_WITH_AS(render_chat(self_attribute, Chat{}, false),
                       doctest::Contains("t.jinja:1:37: cannot set an attribute"), InputError);
  const auto inner = parse_chat_template(
      "{% set ns = namespace(l=[]) %}{% set d = {'ns': [ns]} %}{% set ns.l = d %}{{ ns }}", "t.jinja");
  CHECK_THROWS_WITH_AS(render_chat(inner, Chat{}, false), doctest::Contains("value that holds it"), InputError);
  const auto self_append = parse_chat_template("{% set l = [1] %}{% set m = [l] %}{{ l.append(m) }}{{ l }}", "t.jinja");
  CHECK_THROWS_WITH_AS(render_chat(self_append, Chat{}, false), doctest::Contains("value that holds the list"),
                       InputError);
  const auto nested = parse_chat_template(
      "{% set ns = namespace(x=0) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}",
      "t.jinja");
  CHECK_THROWS_WITH_AS(render_chat(nested, Chat{}, false), doctest::Contains("deeper than 256 levels"), InputError);
  // Sharing a value without a cycle is fine.
  const auto shared = parse_chat_template(
      "{% set l = [1] %}{% set ns = namespace(a=l, b=l) %}{{ l.append(2) }}{{ ns.a }} {{ ns.b | tojson }}", "t.jinja");
  CHECK(render_chat(shared, Chat{}, false) == "[1, 2] [1, 2]");
}

TEST_CASE("numbers at the edges of 64 bits: literals that do not fit are errors, arithmetic that overflows is "
          "floating point (Python would go to big integers), ranges near the limits count without overflow") {
  CHECK_THROWS_WITH_AS(parse_chat_template("{{ 99999999999999999999 }}", "t.jinja"),
                       doctest::Contains("t.jinja:1:4: integer literal '99999999999999999999' does not fit"),
                       InputError);
  const auto render = [](const std::string& source) {
    return parse_chat_template(source, "t.jinja").jinja.render(nlohmann::ordered_json::object());
  };
  CHECK(render("{{ 9223372036854775807 + 1 }}") == "9223372036854775808.0");
  CHECK(render("{{ (-9223372036854775807 - 1) // -1 }}") == "9223372036854775808.0");
  CHECK(render("{{ -7 // 2 }} {{ -7 % 2 }} {{ 7 // -2 }} {{ 7 % -2 }}") == "-4 1 -4 -1");
  CHECK(render("{{ [1, 2][99999999999] }}{{ (10.0 ** 300 * 10.0 ** 300) | int }}") == "0");
  CHECK(render("{{ range(9223372036854775806, 9223372036854775807) | list }}") == "[9223372036854775806]");
  CHECK(render("{{ range(5, -1, -2) | list }}") == "[5, 3, 1]");
  CHECK_THROWS_WITH_AS(render("{{ range(-9223372036854775807, 9223372036854775807) }}"),
                       doctest::Contains("range() is too long"), InputError);
  CHECK_THROWS_AS(render("{{ 'x' | indent(9223372036854775807) }}"), InputError);
}
