#include "model/chat_template.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/text.hpp"

#include <nlohmann/json.hpp>

namespace optkit::model {

namespace {

std::string
token_text(const nlohmann::json& config, const char* key) {
  if (!config.contains(key) || config[key].is_null())
    return {};
  const auto& v = config[key];
  if (v.is_string())
    return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return {};
}

std::string
trimmed(std::string_view s) {
  return std::string(optkit::trim(s));
}

void
require_alternating(const std::vector<ChatMessage>& messages, std::size_t first, std::string_view family) {
  for (std::size_t i = first; i < messages.size(); ++i) {
    const auto& expected = (i - first) % 2 == 0 ? "user" : "assistant";
    if (messages[i].role != expected)
      throw InputError(std::string(family) + " chat format needs user/assistant turns alternating, but message " +
                       std::to_string(i + 1) + " has role '" + messages[i].role + "'");
  }
}

std::string
render_llama3(const ChatTemplate& t, const std::vector<ChatMessage>& messages, bool generation) {
  std::string out = t.bos_token;
  for (const auto& m : messages)
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trimmed(m.content) + "<|eot_id|>";
  if (generation)
    out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string
render_chatml(const std::vector<ChatMessage>& messages, bool generation) {
  std::string out;
  for (const auto& m : messages)
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (generation)
    out += "<|im_start|>assistant\n";
  return out;
}

// Llama-2: [INST] <<SYS>> system <</SYS>> user [/INST] answer </s><s>[INST] ...
std::string
render_llama2(const ChatTemplate& t, const std::vector<ChatMessage>& messages) {
  const bool has_system = !messages.empty() && messages[0].role == "system";
  require_alternating(messages, has_system ? 1 : 0, "llama2");
  std::string out;
  for (std::size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (m.role == "user") {
      std::string content = trimmed(m.content);
      if (has_system && i == 1)
        content = "<<SYS>>\n" + trimmed(messages[0].content) + "\n<</SYS>>\n\n" + content;
      out += t.bos_token + "[INST] " + content + " [/INST]";
    } else {
      out += " " + trimmed(m.content) + " " + t.eos_token;
    }
  }
  return out;
}

// Mistral: <s>[INST] user [/INST] answer</s>[INST] ... ; a system prompt joins the first user turn.
std::string
render_mistral(const ChatTemplate& t, const std::vector<ChatMessage>& messages) {
  const bool has_system = !messages.empty() && messages[0].role == "system";
  require_alternating(messages, has_system ? 1 : 0, "mistral");
  std::string out = t.bos_token;
  for (std::size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (m.role == "user") {
      std::string content = m.content;
      if (has_system && i == 1)
        content = messages[0].content + "\n\n" + content;
      out += "[INST] " + content + " [/INST]";
    } else {
      out += m.content + t.eos_token;
    }
  }
  return out;
}

} // namespace

std::optional<ChatFormat>
recognise_chat_format(const std::string& jinja) {
  if (jinja.find("<|start_header_id|>") != std::string::npos && jinja.find("<|eot_id|>") != std::string::npos)
    return ChatFormat::llama3;
  if (jinja.find("<|im_start|>") != std::string::npos && jinja.find("<|im_end|>") != std::string::npos)
    return ChatFormat::chatml;
  if (jinja.find("[INST]") != std::string::npos && jinja.find("<<SYS>>") != std::string::npos)
    return ChatFormat::llama2;
  if (jinja.find("[INST]") != std::string::npos)
    return ChatFormat::mistral;
  return std::nullopt;
}

std::string_view
chat_format_name(ChatFormat format) {
  switch (format) {
  case ChatFormat::llama3:
    return "llama3";
  case ChatFormat::llama2:
    return "llama2";
  case ChatFormat::mistral:
    return "mistral";
  case ChatFormat::chatml:
    return "chatml";
  }
  return "?";
}

ChatTemplate
load_chat_template(const std::filesystem::path& model_dir) {
  const auto path = model_dir / "tokenizer_config.json";
  const auto config = read_json_file(path, "chat formatting needs the model's tokenizer_config.json");
  if (!config.is_object() || !config.contains("chat_template") || !config["chat_template"].is_string())
    throw InputError(path.string() + ": has no chat_template string; the model cannot be chat-formatted");
  const auto format = recognise_chat_format(config["chat_template"].get<std::string>());
  if (!format)
    throw InputError(path.string() + ": chat_template is not one optkit recognises (supported families: llama3, "
                                     "llama2, mistral, chatml/qwen); format the text yourself and pass it plain");
  return {*format, token_text(config, "bos_token"), token_text(config, "eos_token")};
}

std::string
render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  for (const auto& m : messages)
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      throw InputError("chat message role '" + m.role + "' is not one of system, user, assistant");
  switch (tmpl.format) {
  case ChatFormat::llama3:
    return render_llama3(tmpl, messages, add_generation_prompt);
  case ChatFormat::chatml:
    return render_chatml(messages, add_generation_prompt);
  case ChatFormat::llama2:
    return render_llama2(tmpl, messages);
  case ChatFormat::mistral:
    return render_mistral(tmpl, messages);
  }
  return {};
}

} // namespace optkit::model
