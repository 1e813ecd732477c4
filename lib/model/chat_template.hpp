// Chat-template rendering for the common model families. tokenizer_config.json carries a Jinja
// template; optkit recognises which family's format it is (by the markers the template emits) and
// renders that format natively. An unrecognised template is an error, not a guess.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace optkit::model {

enum class ChatFormat { llama3, llama2, mistral, chatml };

struct ChatMessage {
  std::string role; // system, user, assistant
  std::string content;
};

struct ChatTemplate {
  ChatFormat format = ChatFormat::chatml;
  std::string bos_token; // as tokenizer_config.json names it ("" when none)
  std::string eos_token;
};

// Recognises the family of a Jinja chat template; nullopt when it is none of the supported ones.
std::optional<ChatFormat> recognise_chat_format(const std::string& jinja);
std::string_view chat_format_name(ChatFormat format);

// Reads tokenizer_config.json of a model folder. Throws InputError when it has no chat_template
// or the template is not recognised (naming the supported families).
ChatTemplate load_chat_template(const std::filesystem::path& model_dir);

// The prompt text, including the BOS token where the family writes it into the template.
std::string render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages, bool add_generation_prompt);

} // namespace optkit::model
