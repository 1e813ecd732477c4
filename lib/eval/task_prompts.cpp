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

std::vector<TaskItem>
build_task_items(const TaskSuite& suite, const std::vector<Document>& docs, const std::vector<Document>& fewshot) {
  // lm-eval renders with Jinja's keep_trailing_newline.
  const auto text_tmpl = jinja::Template::parse(suite.prompt_template, suite.name + ": doc_to_text", true);
  const auto target_tmpl = jinja::Template::parse(suite.target_template.empty() ? "" : suite.target_template,
                                                  suite.name + ": doc_to_target", true);
  const auto n_shot = static_cast<std::size_t>(suite.num_fewshot);
  if (n_shot > fewshot.size())
    throw InputError(fmt::format("suite {}: num_fewshot {} but the few-shot file has {} exemplars", suite.name, n_shot,
                                 fewshot.size()));
  std::vector<Exemplar> exemplars;
  for (const auto& ex : fewshot)
    exemplars.push_back({render(text_tmpl, ex), render(target_tmpl, ex)});
  PythonRandom random(static_cast<std::uint64_t>(suite.fewshot_seed));

  std::vector<TaskItem> items;
  items.reserve(docs.size());
  for (std::size_t i = 0; i < docs.size(); ++i) {
    TaskItem item;
    item.index = i;
    item.doc = docs[i];
    try {
      item.target = suite.target_template.empty() ? std::string() : render(target_tmpl, docs[i]);
      const std::string text = render(text_tmpl, docs[i]);
      std::vector<std::size_t> chosen;
      if (n_shot > 0) {
        if (suite.fewshot_sampler == "random")
          chosen = random.sample(exemplars.size(), n_shot);
        else
          for (std::size_t k = 0; k < n_shot; ++k)
            chosen.push_back(k);
      }
      if (suite.api == SuiteApi::completions || !suite.fewshot_as_multiturn) {
        std::string context = suite.description_text;
        for (const auto k : chosen)
          context += exemplars[k].text + suite.target_delimiter + exemplars[k].target + suite.fewshot_delimiter;
        context += text;
        if (suite.api == SuiteApi::completions) {
          item.prompt = std::move(context);
        } else {
          item.messages = nlohmann::json::array();
          item.messages.push_back({{"role", "user"}, {"content", context}});
        }
      } else {
        item.messages = nlohmann::json::array();
        if (!suite.description_text.empty())
          item.messages.push_back({{"role", "system"}, {"content", suite.description_text}});
        for (const auto k : chosen) {
          item.messages.push_back({{"role", "user"}, {"content", exemplars[k].text}});
          item.messages.push_back({{"role", "assistant"}, {"content", exemplars[k].target}});
        }
        item.messages.push_back({{"role", "user"}, {"content", text}});
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
