// libFuzzer target for the Jinja chat-template interpreter: the input is a template. Parsing may
// refuse it; a parsed template is rendered with a small chat (with tools) and must finish — the
// interpreter's step, recursion, nesting and output bounds make every template terminate.
#include "core/error.hpp"
#include "jinja/template.hpp"

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto context = nlohmann::ordered_json::parse(R"({
    "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true,
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                 {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
                   "function": {"name": "f", "arguments": {"x": 1}}}]},
                 {"role": "tool", "content": "42"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]})");
  try {
    const auto tmpl =
        optkit::jinja::Template::parse(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    (void)tmpl.render(context);
  } catch (const optkit::InputError&) {
  }
  return 0;
}
