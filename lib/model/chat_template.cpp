#include "model/chat_template.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/gguf_model.hpp"

namespace optkit::model {

namespace {

using nlohmann::json;

// tokenizer_config.json spells a special token as a string or as {"content": ..., ...}.
std::optional<std::string>
token_text(const json& v) {
  if (v.is_string())
    return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return std::nullopt;
}

} // namespace

ChatTemplate
parse_chat_template(const std::string& jinja_text, const std::string& source, nlohmann::ordered_json special_tokens) {
  return {jinja::Template::parse(jinja_text, source), source, jinja_text, "default", {}, std::move(special_tokens)};
}

ChatTemplate
load_chat_template(const std::filesystem::path& model_dir, const std::optional<std::string>& name) {
  if (is_gguf_model(model_dir)) {
    const GgufFile file(model_dir);
    const auto text = gguf_chat_template(file);
    if (!text)
      throw InputError(model_dir.string() + ": has no tokenizer.chat_template; the model cannot be chat-formatted: "
                                            "pass plain text instead");
    return parse_chat_template(*text, model_dir.string() + " tokenizer.chat_template", gguf_special_tokens(file));
  }
  const auto config_path = model_dir / "tokenizer_config.json";
  json config = json::object();
  if (std::filesystem::exists(config_path))
    config = read_json_file(config_path);
  nlohmann::ordered_json special = nlohmann::ordered_json::object();
  if (config.is_object())
    for (const auto& [key, value] : config.items())
      if (key.ends_with("_token"))
        if (const auto text = token_text(value))
          special[key] = *text;

  std::string text, source;
  std::vector<std::string> names;
  std::string chosen = "default";
  const auto& tmpl = config.is_object() && config.contains("chat_template") ? config["chat_template"] : json();
  if (tmpl.is_string()) {
    text = tmpl.get<std::string>();
    source = config_path.string() + " chat_template";
  } else if (tmpl.is_array()) {
    for (const auto& entry : tmpl)
      if (entry.is_object() && entry.contains("name") && entry["name"].is_string())
        names.push_back(entry["name"].get<std::string>());
    chosen = name.value_or("default");
    for (const auto& entry : tmpl)
      if (entry.value("name", "") == chosen && entry.contains("template") && entry["template"].is_string())
        text = entry["template"].get<std::string>();
    if (text.empty())
      throw InputError(config_path.string() + ": chat_template has no template named '" + chosen + "'");
    source = config_path.string() + " chat_template[" + chosen + "]";
  } else if (std::filesystem::exists(model_dir / "chat_template.jinja")) {
    text = read_input_file(model_dir / "chat_template.jinja");
    source = (model_dir / "chat_template.jinja").string();
  } else {
    throw InputError(model_dir.string() +
                     ": has no chat template (neither tokenizer_config.json's chat_template nor chat_template.jinja); "
                     "the model cannot be chat-formatted: pass plain text instead");
  }
  auto result = parse_chat_template(text, source, std::move(special));
  result.name = chosen;
  result.names = std::move(names);
  return result;
}

std::string
render_chat(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages, bool add_generation_prompt,
            const nlohmann::ordered_json& tools, const nlohmann::ordered_json& extra) {
  nlohmann::ordered_json context = tmpl.special_tokens;
  context["messages"] = messages;
  context["add_generation_prompt"] = add_generation_prompt;
  if (!tools.is_null())
    context["tools"] = tools;
  for (const auto& [key, value] : extra.items())
    context[key] = value;
  return tmpl.jinja.render(context);
}

std::string
render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  auto list = nlohmann::ordered_json::array();
  for (const auto& m : messages)
    list.push_back({{"role", m.role}, {"content", m.content}});
  return render_chat(tmpl, list, add_generation_prompt);
}

} // namespace optkit::model
