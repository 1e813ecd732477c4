// Test helper for the chat-template conformance test: renders every (template, context) case of a
// JSON file with optkit's Jinja interpreter and prints [{"output": text} | {"error": message}].
//   render_chat_cases CASES_JSON     (cases: [{"template": ..., "context": {...}}])
#include "jinja/template.hpp"

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

int
main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: render_chat_cases CASES_JSON\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  const auto cases = nlohmann::ordered_json::parse(in);
  auto out = nlohmann::json::array();
  for (const auto& c : cases) {
    try {
      const auto tmpl =
          optkit::jinja::Template::parse(c.at("template").get<std::string>(), c.value("name", "template"));
      out.push_back({{"output", tmpl.render(c.at("context"))}});
    } catch (const std::exception& e) {
      out.push_back({{"error", e.what()}});
    }
  }
  std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}
