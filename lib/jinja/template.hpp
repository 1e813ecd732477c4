// A Jinja template as Hugging Face chat templates use the language, parsed once and rendered with a
// JSON context (messages, tools, add_generation_prompt, bos_token, ...). Rendering matches
// @huggingface/jinja, the renderer transformers.js uses (tests/conformance holds it byte-identical):
// trim_blocks and lstrip_blocks on, none renders as nothing, tojson as Python's json.dumps.
// Globals: range, namespace, raise_exception, strftime_now, dict. Rendering is bounded: a template
// that loops or recurses without end, or writes more than 64 MiB, fails with InputError.
#pragma once

#include "jinja/ast.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace optkit::jinja {

class Template {
public:
  // Throws InputError "<name>:<line>:<column>: ..." for a syntax error or unsupported construct.
  // keep_trailing_newline: as Jinja's option (lm-eval's task templates set it; chat templates do not).
  static Template parse(std::string_view source, const std::string& name, bool keep_trailing_newline = false);
  // `context` keeps its keys' order (tojson writes dicts in insertion order, as Python does).
  // Throws InputError (with the position of the failing expression) for a runtime error, including
  // a raise_exception the template calls.
  // `max_steps` bounds the expressions and loop iterations evaluated.
  static constexpr std::uint64_t kDefaultMaxSteps = 5'000'000;
  std::string render(const nlohmann::ordered_json& context, std::uint64_t max_steps = kDefaultMaxSteps) const;

private:
  std::string m_name;
  std::shared_ptr<const Body> m_body;
};

} // namespace optkit::jinja
