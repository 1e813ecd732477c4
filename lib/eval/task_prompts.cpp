#include "eval/task_prompts.hpp"

#include "core/error.hpp"
#include "eval/python_random.hpp"
#include "jinja/template.hpp"

#include <fmt/format.h>

namespace optkit::eval {

namespace {

std::string
render(const jinja::Template& tmpl, const Document& doc) {
  return tmpl.render(doc);
}

struct Exemplar {
  std::string text, target;
};

} // namespace

std::string
system_prompt(const TaskSuite& suite, const std::optional<std::string>& instruction, const std::string& description) {
  if (instruction && !description.empty())
    return *instruction + suite.fewshot_delimiter + description;
  return instruction ? *instruction : description;
}

namespace {

nlohmann::json
message(const char* role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}

// lm-eval's chat context: the system prompt, the exemplars (one user message, or a turn each), the
// question appended to the last user message or, multiturn or after the system message alone, a
// user message of its own.
nlohmann::json
chat_messages(const TaskSuite& suite, const std::string& system, const std::vector<Exemplar>& exemplars,
              const std::string& question) {
  auto messages = nlohmann::json::array();
  if (!system.empty())
    messages.push_back(message("system", system));
  if (suite.fewshot_as_multiturn) {
    for (const auto& ex : exemplars) {
      messages.push_back(message("user", ex.text));
      messages.push_back(message("assistant", ex.target));
    }
    messages.push_back(message("user", question));
    return messages;
  }
  std::string context;
  for (const auto& ex : exemplars)
    context += ex.text + suite.target_delimiter + ex.target + suite.fewshot_delimiter;
  if (!exemplars.empty())
    messages.push_back(message("user", context + question));
  else
    messages.push_back(message("user", question));
  return messages;
}

} // namespace

std::vector<TaskItem>
build_task_items(const TaskSuite& suite, const std::vector<Document>& docs, const std::vector<Document>& fewshot,
                 const PromptOptions& options) {
  // lm-eval renders with Jinja's keep_trailing_newline.
  const auto text_tmpl = jinja::Template::parse(suite.prompt_template, suite.name + ": doc_to_text", true);
  const auto target_tmpl = jinja::Template::parse(suite.target_template.empty() ? "" : suite.target_template,
                                                  suite.name + ": doc_to_target", true);
  const auto description_tmpl = jinja::Template::parse(suite.description_text, suite.name + ": description", true);
  const auto n_shot = static_cast<std::size_t>(suite.num_fewshot);
  if (n_shot > fewshot.size())
    throw InputError(fmt::format("suite {}: num_fewshot {} but the few-shot file has {} exemplars", suite.name, n_shot,
                                 fewshot.size()));
  std::vector<Exemplar> exemplars;
  for (const auto& ex : fewshot)
    exemplars.push_back({render(text_tmpl, ex), render(target_tmpl, ex)});
  PythonRandom random(static_cast<std::uint64_t>(suite.fewshot_seed));
  const bool chat = suite.api == SuiteApi::chat || options.chat_template != nullptr;

  std::vector<TaskItem> items;
  items.reserve(docs.size());
  for (std::size_t i = 0; i < docs.size(); ++i) {
    TaskItem item;
    item.index = i;
    item.doc = docs[i];
    try {
      item.target = suite.target_template.empty() ? std::string() : render(target_tmpl, docs[i]);
      const std::string text = render(text_tmpl, docs[i]);
      std::vector<Exemplar> chosen;
      if (n_shot > 0) {
        if (suite.fewshot_sampler == "random")
          for (const auto k : random.sample(exemplars.size(), n_shot))
            chosen.push_back(exemplars[k]);
        else
          chosen.assign(exemplars.begin(), exemplars.begin() + static_cast<std::ptrdiff_t>(n_shot));
      }
      const std::string system = system_prompt(suite, options.system_instruction, render(description_tmpl, docs[i]));
      if (!chat) {
        item.prompt = system;
        for (const auto& ex : chosen)
          item.prompt += ex.text + suite.target_delimiter + ex.target + suite.fewshot_delimiter;
        item.prompt += text;
      } else if (suite.api == SuiteApi::chat) {
        item.messages = chat_messages(suite, system, chosen, text);
      } else {
        std::vector<model::ChatMessage> messages;
        for (const auto& m : chat_messages(suite, system, chosen, text))
          messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
        item.prompt = model::render_chat(*options.chat_template, messages, true);
      }
    } catch (const InputError& e) {
      throw InputError(fmt::format("suite {}: document {}: {}", suite.name, i, e.what()));
    }
    items.push_back(std::move(item));
  }
  return items;
}

nlohmann::json
request_body(const TaskSuite& suite, const TaskItem& item) {
  nlohmann::json body;
  if (suite.api == SuiteApi::chat)
    body["messages"] = item.messages;
  else
    body["prompt"] = item.prompt;
  body["max_tokens"] = suite.max_gen_toks;
  body["temperature"] = suite.temperature;
  body["seed"] = suite.seed;
  if (!suite.until.empty())
    body["stop"] = suite.until;
  return body;
}

} // namespace optkit::eval
