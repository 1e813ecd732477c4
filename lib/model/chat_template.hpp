// A model's chat template, executed: the Jinja text of tokenizer_config.json's chat_template (a
// string, or a list of named templates of which "default" is used unless another is asked for) or
// of chat_template.jinja beside it, rendered by optkit's Jinja interpreter with the context
// transformers' apply_chat_template passes: messages, tools, add_generation_prompt and the special
// tokens of tokenizer_config.json (bos_token, eos_token, ...). A template that uses a construct the
// interpreter lacks fails at load with the template's line and column.
#pragma once

#include "jinja/template.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace optkit::model {

struct ChatMessage {
  std::string role; // system, user, assistant, tool
  std::string content;
};

struct ChatTemplate {
  jinja::Template jinja;
  std::string source;             // e.g. "tokenizer_config.json chat_template" or "chat_template.jinja"
  std::string text;               // the Jinja source
  std::string name;               // the named template used ("default" when the file has one)
  std::vector<std::string> names; // every named template the file offers
  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object(); // bos_token, eos_token, ... as text
};

// Throws InputError when the folder has no chat template or it does not parse.
ChatTemplate load_chat_template(const std::filesystem::path& model_dir, const std::optional<std::string>& name = {});
ChatTemplate parse_chat_template(const std::string& jinja_text, const std::string& source,
                                 nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object());

// The prompt text. `messages` and `tools` are as the OpenAI chat API carries them, parsed with
// their keys in order (ordered_json), since templates write tool schemas back out with tojson.
std::string render_chat(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages, bool add_generation_prompt,
                        const nlohmann::ordered_json& tools = nullptr,
                        const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());
std::string render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages, bool add_generation_prompt);

} // namespace optkit::model
