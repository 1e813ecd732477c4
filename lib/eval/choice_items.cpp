#include "eval/choice_items.hpp"

#include "core/error.hpp"
#include "core/text.hpp"
#include "eval/document_preprocessors.hpp"
#include "eval/python_random.hpp"
#include "jinja/template.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace optkit::eval {

namespace {

using Json = nlohmann::ordered_json;

// One of lm-eval's doc_to_* settings: the name of a document field (its value as it is), a single
// Jinja expression "{{ ... }}" (its value, lists included), or a template (the text it renders).
// Templates render with Jinja's keep_trailing_newline, as lm-eval's do (MMLU's description ends in
// two newlines).
class DocExpression {
public:
  DocExpression(const std::string& source, const std::string& name) : m_source(source) {
    const auto open = source.find("{{"), close = source.rfind("}}");
    const bool single = open == 0 && close + 2 == source.size() && source.find("{{", 2) == std::string::npos &&
                        source.find("}}") == close && source.find("{%") == std::string::npos;
    const std::string text = single ? "{{ (" + source.substr(2, close - 2) + ") | tojson }}" : source;
    m_template.emplace(jinja::Template::parse(text, name, true));
    m_json = single;
  }

  Json value(const Document& doc) const {
    if (const auto it = doc.find(m_source); it != doc.end())
      return *it;
    const std::string text = m_template->render(doc);
    if (!m_json)
      return text;
    const auto parsed = Json::parse(text, nullptr, false);
    return parsed.is_discarded() ? Json(text) : parsed;
  }

private:
  std::string m_source;
  std::optional<jinja::Template> m_template;
  bool m_json = false;
};

// What one document says, before few-shot context is added.
struct ChoiceParts {
  std::string text;                 // doc_to_text (empty in multiple-input mode)
  std::optional<std::size_t> input; // multiple-input mode: the index doc_to_text gave
  std::vector<std::string> choices;
  Json target; // an index, or a string (a choice, or multiple-input's continuation)
};

struct SuiteExpressions {
  jinja::Template description, text;
  DocExpression choices, target, labels;
  explicit SuiteExpressions(const TaskSuite& s)
      : description(jinja::Template::parse(s.description_text, s.name + ": description", true))
      , text(jinja::Template::parse(s.prompt_template, s.name + ": doc_to_text", true))
      , choices(s.choice.choices, s.name + ": doc_to_choice")
      , target(s.target_template, s.name + ": doc_to_target")
      , labels(s.choice.mc2_labels, s.name + ": mc2_labels") {}
};

std::vector<std::string>
string_list(const Json& value, const std::string& what) {
  if (!value.is_array())
    throw InputError(what + " must be a list, got " + value.dump());
  std::vector<std::string> out;
  for (const auto& v : value)
    out.push_back(v.is_string() ? v.get<std::string>() : v.dump());
  return out;
}

ChoiceParts
parts_of(const SuiteExpressions& e, const Document& doc) {
  ChoiceParts p;
  p.choices = string_list(e.choices.value(doc), "doc_to_choice");
  if (p.choices.empty())
    throw InputError("doc_to_choice gave no choices");
  // lm-eval: a prompt that renders to digits, in a task with choices, is multiple-input's index.
  const std::string text = e.text.render(doc);
  if (is_index_text(text))
    p.input = std::stoul(text);
  else
    p.text = text;
  p.target = e.target.value(doc);
  if (p.target.is_string() && is_index_text(p.target.get<std::string>()))
    p.target = std::stoi(p.target.get<std::string>());
  if (p.input && *p.input >= p.choices.size())
    throw InputError(fmt::format("doc_to_text's index {} is past the {} choices", *p.input, p.choices.size()));
  return p;
}

// The correct choice: the target's index, or the choice the target names.
std::size_t
gold_of(const ChoiceParts& p) {
  if (p.input)
    return *p.input;
  if (p.target.is_number_integer()) {
    const auto gold = p.target.get<long long>();
    if (gold < 0 || static_cast<std::size_t>(gold) >= p.choices.size())
      throw InputError(fmt::format("doc_to_target {} is not one of the {} choices' indexes", gold, p.choices.size()));
    return static_cast<std::size_t>(gold);
  }
  if (p.target.is_string()) {
    const auto it = std::find(p.choices.begin(), p.choices.end(), p.target.get<std::string>());
    if (it == p.choices.end())
      throw InputError("doc_to_target \"" + p.target.get<std::string>() + "\" is not among the choices");
    return static_cast<std::size_t>(it - p.choices.begin());
  }
  throw InputError("doc_to_target must be an index or a choice, got " + p.target.dump());
}

// The target as an exemplar shows it (lm-eval's sampler): the choice for an index, else the text.
std::string
target_text(const ChoiceParts& p) {
  if (p.target.is_number_integer() && !p.input)
    return p.choices[gold_of(p)];
  return p.target.is_string() ? p.target.get<std::string>() : p.target.dump();
}

// An exemplar as lm-eval's sampler shows it: its prompt (or, multiple-input, its correct choice)
// and its target.
struct Exemplar {
  std::string text, target;
};

Exemplar
exemplar_of(const ChoiceParts& p) {
  return {p.input ? p.choices[*p.input] : p.text, target_text(p)};
}

struct Exemplars {
  std::vector<Document> docs;
  std::vector<Exemplar> shown;
};

std::string
field_text(const Document& doc, const std::string& field) {
  const auto it = doc.find(field);
  if (it == doc.end())
    throw InputError("the document has no field '" + field + "'");
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// The exemplars for one document: first_n or Python's random.sample (seeded once per suite,
// advanced per document, as lm-eval's sampler is), among those matching the document's field when
// fewshot.match names one (MMLU's subject).
std::vector<Exemplar>
fewshot_exemplars(const TaskSuite& s, const Exemplars& exemplars, const Document& doc, PythonRandom& random) {
  const auto n_shot = static_cast<std::size_t>(s.num_fewshot);
  if (n_shot == 0)
    return {};
  std::vector<std::size_t> pool;
  for (std::size_t k = 0; k < exemplars.docs.size(); ++k)
    if (s.choice.fewshot_match.empty() ||
        field_text(exemplars.docs[k], s.choice.fewshot_match) == field_text(doc, s.choice.fewshot_match))
      pool.push_back(k);
  if (pool.size() < n_shot)
    throw InputError(fmt::format("{}-shot needs {} exemplars{}, the few-shot file has {}", n_shot, n_shot,
                                 s.choice.fewshot_match.empty() ? "" : " with this " + s.choice.fewshot_match,
                                 pool.size()));
  std::vector<std::size_t> chosen;
  if (s.fewshot_sampler == "random")
    for (const auto k : random.sample(pool.size(), n_shot))
      chosen.push_back(pool[k]);
  else
    chosen.assign(pool.begin(), pool.begin() + static_cast<std::ptrdiff_t>(n_shot));
  std::vector<Exemplar> out;
  for (const auto k : chosen)
    out.push_back(exemplars.shown[k]);
  return out;
}

// lm-eval's context before the question: the system prompt and the exemplars (text, target
// delimiter, target, few-shot delimiter each).
std::string
plain_context(const TaskSuite& s, const std::string& system, const std::vector<Exemplar>& exemplars) {
  std::string context = system;
  for (const auto& ex : exemplars)
    context += ex.text + s.target_delimiter + ex.target + s.fewshot_delimiter;
  return context;
}

// With a chat template: the conversation up to the question, rendered with the generation prompt;
// lm-eval then drops the target delimiter (the assistant turn starts the choice).
std::string
chat_context(const TaskSuite& s, const model::ChatTemplate& tmpl, const std::string& system,
             const std::vector<Exemplar>& exemplars, const std::string& question) {
  std::vector<model::ChatMessage> messages;
  if (!system.empty())
    messages.push_back({"system", system});
  if (s.fewshot_as_multiturn) {
    for (const auto& ex : exemplars) {
      messages.push_back({"user", ex.text});
      messages.push_back({"assistant", ex.target});
    }
    messages.push_back({"user", question});
  } else {
    messages.push_back({"user", plain_context(s, "", exemplars) + question});
  }
  return model::render_chat(tmpl, messages, true);
}

std::vector<int>
labels_of(const SuiteExpressions& e, const Document& doc, std::size_t choices) {
  const auto value = e.labels.value(doc);
  if (!value.is_array() || value.size() != choices)
    throw InputError(fmt::format("mc2_labels must be a list of {} labels, got {}", choices, value.dump()));
  std::vector<int> labels;
  for (const auto& v : value) {
    if (!v.is_number_integer())
      throw InputError("mc2_labels must be 0/1 integers, got " + value.dump());
    labels.push_back(v.get<int>() != 0 ? 1 : 0);
  }
  return labels;
}

ChoiceItem
choice_item(const TaskSuite& s, const SuiteExpressions& e, const Document& doc, const std::vector<Exemplar>& exemplars,
            const PromptOptions& options) {
  const auto p = parts_of(e, doc);
  ChoiceItem item;
  item.choices = p.choices;
  item.gold = gold_of(p);
  item.multiple_input = p.input.has_value();
  const std::string system = system_prompt(s, options.system_instruction, e.description.render(doc));
  if (options.chat_template != nullptr) {
    if (p.input)
      throw InputError("--apply-chat-template: a multiple-input suite (its prompt is an index) has no question to "
                       "put in a user turn; evaluate it without the chat template");
    const auto context = chat_context(s, *options.chat_template, system, exemplars, p.text);
    for (const auto& choice : p.choices)
      item.requests.push_back({context, choice});
  } else {
    const auto head = plain_context(s, system, exemplars);
    for (const auto& choice : p.choices) {
      if (p.input)
        item.requests.push_back({head + choice, s.target_delimiter + target_text(p)});
      else
        item.requests.push_back({head + p.text, s.target_delimiter + choice});
    }
  }
  if (!s.choice.mc2_labels.empty())
    item.mc2_labels = labels_of(e, doc, p.choices.size());
  if (!s.choice.breakdown.empty())
    item.breakdown = field_text(doc, s.choice.breakdown);
  return item;
}

} // namespace

std::vector<ChoiceItem>
build_choice_items(const TaskSuite& s, const std::vector<Document>& docs, const std::vector<Document>& fewshot,
                   const PromptOptions& options) {
  const SuiteExpressions e(s);
  Exemplars exemplars;
  for (std::size_t k = 0; k < fewshot.size(); ++k) {
    try {
      exemplars.docs.push_back(preprocess_document(s.choice.process_docs, fewshot[k]));
      exemplars.shown.push_back(exemplar_of(parts_of(e, exemplars.docs.back())));
    } catch (const InputError& error) {
      throw InputError(fmt::format("suite {}: few-shot document {}: {}", s.name, k, error.what()));
    }
  }
  PythonRandom random(static_cast<std::uint64_t>(s.fewshot_seed));
  std::vector<ChoiceItem> items;
  items.reserve(docs.size());
  for (std::size_t i = 0; i < docs.size(); ++i) {
    try {
      const auto doc = preprocess_document(s.choice.process_docs, docs[i]);
      items.push_back(choice_item(s, e, doc, fewshot_exemplars(s, exemplars, doc, random), options));
      items.back().index = i;
    } catch (const InputError& error) {
      throw InputError(fmt::format("suite {}: document {}: {}", s.name, i, error.what()));
    }
  }
  return items;
}

} // namespace optkit::eval
