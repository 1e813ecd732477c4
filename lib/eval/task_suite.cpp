#include "eval/task_suite.hpp"

#include "core/error.hpp"
#include "core/resource_paths.hpp"
#include "core/schema_fields.hpp"
#include "core/yaml_schema.hpp"

#include <algorithm>

namespace optkit::eval {

namespace {

using config::bounded;
using config::Field;
using config::object_field;
using config::Schema;
using config::Type;

Field
string_list(std::string name, std::string help) {
  Field field{std::move(name), Type::list, false, std::move(help)};
  field.item = std::make_shared<const Field>(Field{"item", Type::string, true, "a string"});
  return field;
}

// MMLU's subjects and subject groups: a metric per value of a field, and per named group of values.
Field
breakdown_field() {
  Field group{"group", Type::object, true, "a named group of the field's values"};
  group.object =
      std::make_shared<const Schema>(Schema{"breakdown group",
                                            {Field{"name", Type::string, true, "the group's name, as metrics show it"},
                                             string_list("members", "the field's values in the group")}});
  Field groups{"groups", Type::list, false, "groups of values, each aggregated weighted by size"};
  groups.item = std::make_shared<const Field>(group);
  return object_field("breakdown", "multiple_choice: a metric per value of a field (MMLU's subject)",
                      Schema{"breakdown", {Field{"field", Type::string, true, "the document field"}, groups}});
}

const Schema&
suite_schema() {
  static const Schema schema = [] {
    Field filters{"filters", Type::list, false, "answer-extraction pipelines, one score each (exact_match)"};
    Field step{"step", Type::object, true, "one filter function"};
    step.object = std::make_shared<const Schema>(
        Schema{"filter step",
               {Field{"function",
                      Type::string,
                      true,
                      "what the step does",
                      {"regex", "take_first", "lowercase", "uppercase", "remove_whitespace", "strip"}},
                Field{"regex_pattern", Type::string, false, "regex: the pattern (Python re syntax)"},
                Field{"group_select", Type::integer, false, "regex: which match, negative from the end (default 0)"},
                Field{"fallback", Type::string, false, "regex: the answer when nothing matches (default [invalid])"}}});
    Field steps{"filter", Type::list, true, "the steps in order"};
    steps.item = std::make_shared<const Field>(step);
    Field pipeline{"pipeline", Type::object, true, "a named filter pipeline"};
    pipeline.object = std::make_shared<const Schema>(
        Schema{"filter pipeline", {Field{"name", Type::string, true, "e.g. strict-match"}, steps}});
    filters.item = std::make_shared<const Field>(pipeline);

    return Schema{
        "task suite",
        {Field{"name", Type::string, true, "the suite's name, as reports show it"},
         Field{"version", Type::integer, false, "the lm-eval task version it reproduces"},
         Field{"description", Type::string, false, "text prepended to every prompt (lm-eval's description)"},
         Field{"scorer",
               Type::string,
               true,
               "how answers are scored",
               {"exact_match", "ifeval", "do_not_answer", "perplexity", "multiple_choice"}},
         Field{"api", Type::string, false, "completions (default) or chat", {"completions", "chat"}},
         Field{"data", Type::string, false, "documents: JSONL, JSON list or CSV, relative to this file"},
         string_list("columns", "the fields every document must have"),
         Field{"doc_to_text", Type::string, false, "the prompt, a Jinja template over a document's fields"},
         Field{"doc_to_target", Type::string, false, "the reference answer, a Jinja template"},
         Field{"question_field", Type::string, false, "do_not_answer: the field holding the question"},
         Field{"doc_to_choice", Type::string, false,
               "multiple_choice: the choices, a field naming a list or a Jinja expression \"{{ ... }}\""},
         Field{"process_docs", Type::string, false, "multiple_choice: lm-eval's preprocessing", {"hellaswag"}},
         string_list("metrics", "multiple_choice: acc, acc_norm, acc_bytes, mc2 (default acc, acc_norm)"),
         Field{"mc2_labels", Type::string, false, "mc2: 1/0 per choice, true ones first (a field or \"{{ ... }}\")"},
         bounded(Field{"max_length", Type::integer, false, "multiple_choice: most tokens per request (default 2048)"},
                 2, 1 << 24),
         breakdown_field(),
         object_field(
             "fewshot", "few-shot exemplars",
             Schema{"fewshot",
                    {bounded(Field{"num_fewshot", Type::integer, false, "exemplars per prompt"}, 0, 64),
                     Field{"file", Type::string, false, "exemplar documents, relative to this file"},
                     Field{"sampler", Type::string, false, "first_n (default) or random", {"first_n", "random"}},
                     Field{"seed", Type::integer, false, "random sampler seed (default 1234)"},
                     Field{"fewshot_delimiter", Type::string, false, "between exemplars (default two newlines)"},
                     Field{"target_delimiter", Type::string, false, "between text and target (default a space)"},
                     Field{"as_multiturn", Type::boolean, false, "chat: one user/assistant turn per exemplar"},
                     Field{"match", Type::string, false, "exemplars whose field of this name equals the document's"}}}),
         object_field(
             "generation", "generation settings",
             Schema{"generation",
                    {string_list("until", "stop strings"),
                     bounded(Field{"max_gen_toks", Type::integer, false, "most generated tokens"}, 1, 1 << 20),
                     bounded(Field{"temperature", Type::number, false, "0: greedy (default)"}, 0, 10),
                     Field{"seed", Type::integer, false, "sampling seed sent with each request (default 1234)"}}}),
         filters,
         object_field(
             "perplexity", "perplexity: the window protocol (eval perplexity's)",
             Schema{"perplexity",
                    {bounded(Field{"ctx", Type::integer, false, "tokens per window (default 512)"}, 8, 1 << 20),
                     bounded(Field{"stride", Type::integer, false, "tokens between windows (default ctx)"}, 0, 1 << 20),
                     bounded(Field{"max_windows", Type::integer, false, "at most this many windows"}, 0, 1 << 30)}}),
         object_field("metric", "exact_match options (HF evaluate)",
                      Schema{"metric",
                             {Field{"ignore_case", Type::boolean, false, "lower-case both sides"},
                              Field{"ignore_punctuation", Type::boolean, false, "drop ASCII punctuation"},
                              Field{"ignore_numbers", Type::boolean, false, "drop digits"},
                              string_list("regexes_to_ignore", "patterns removed from both sides first")}})}};
  }();
  return schema;
}

std::filesystem::path
relative_to(const std::filesystem::path& file, const std::string& path) {
  if (path.empty())
    return {};
  const std::filesystem::path p(path);
  return p.is_absolute() ? p : file.parent_path() / p;
}

std::filesystem::path
suites_directory() {
  return find_data_directory().path / "profiles" / "suites";
}

void
load_multiple_choice(const std::filesystem::path& file, const nlohmann::json& doc, TaskSuite& s) {
  auto& c = s.choice;
  if (s.api == SuiteApi::chat)
    throw InputError(file.string() +
                     ": a multiple_choice suite scores loglikelihoods, which a chat-completions endpoint cannot return "
                     "(no prompt logprobs; lm-eval refuses it too): use api: completions");
  c.choices = doc.value("doc_to_choice", "");
  if (c.choices.empty())
    throw InputError(file.string() + ": scorer multiple_choice needs doc_to_choice (the choices)");
  if (s.target_template.empty())
    throw InputError(file.string() + ": scorer multiple_choice needs doc_to_target (the correct choice)");
  c.process_docs = doc.value("process_docs", "");
  c.metrics = doc.value("metrics", c.metrics);
  c.mc2_labels = doc.value("mc2_labels", "");
  c.max_length = doc.value("max_length", c.max_length);
  for (const auto& m : c.metrics) {
    if (m != "acc" && m != "acc_norm" && m != "acc_bytes" && m != "mc2")
      throw InputError(file.string() + ": metrics: unknown '" + m + "' (acc, acc_norm, acc_bytes or mc2)");
    if (m == "mc2" && c.mc2_labels.empty())
      throw InputError(file.string() + ": metric mc2 needs mc2_labels (which choices are true)");
  }
  const auto has = [&c](const char* m) { return std::find(c.metrics.begin(), c.metrics.end(), m) != c.metrics.end(); };
  if (has("mc2") && has("acc"))
    throw InputError(file.string() + ": metrics mc2 and acc together: mc2 is reported as acc (as lm-eval reports it)");
  if (doc.contains("breakdown")) {
    c.breakdown = doc["breakdown"].at("field").get<std::string>();
    for (const auto& g : doc["breakdown"].value("groups", nlohmann::json::array()))
      c.groups.push_back({g.at("name").get<std::string>(), g.value("members", std::vector<std::string>{})});
  }
}

} // namespace

TaskSuite
load_task_suite(const std::filesystem::path& file) {
  const auto doc = config::load_yaml_file(file, suite_schema());
  TaskSuite s;
  s.file = file;
  s.name = doc.at("name").get<std::string>();
  s.version = doc.value("version", 0);
  s.description_text = doc.value("description", "");
  const std::string scorer = doc.at("scorer").get<std::string>();
  s.scorer = scorer == "ifeval"            ? Scorer::ifeval
             : scorer == "do_not_answer"   ? Scorer::do_not_answer
             : scorer == "perplexity"      ? Scorer::perplexity
             : scorer == "multiple_choice" ? Scorer::multiple_choice
                                           : Scorer::exact_match;
  s.api = doc.value("api", "completions") == "chat" ? SuiteApi::chat : SuiteApi::completions;
  s.data = relative_to(file, doc.value("data", ""));
  s.columns = doc.value("columns", std::vector<std::string>{});
  s.prompt_template = doc.value("doc_to_text", "");
  if (s.prompt_template.empty() && s.scorer != Scorer::perplexity)
    throw InputError(file.string() + ": scorer " + scorer + " needs doc_to_text (the prompt)");
  if (doc.contains("perplexity")) {
    const auto& p = doc["perplexity"];
    s.ppl_ctx = p.value("ctx", std::int64_t{512});
    s.ppl_stride = p.value("stride", std::int64_t{0});
    s.ppl_max_windows = p.value("max_windows", std::int64_t{0});
  }
  s.target_template = doc.value("doc_to_target", "");
  s.question_field = doc.value("question_field", "question");
  if (doc.contains("fewshot")) {
    const auto& f = doc["fewshot"];
    s.num_fewshot = f.value("num_fewshot", 0);
    s.fewshot = relative_to(file, f.value("file", ""));
    s.fewshot_sampler = f.value("sampler", "first_n");
    s.fewshot_seed = f.value("seed", 1234);
    s.fewshot_delimiter = f.value("fewshot_delimiter", "\n\n");
    s.target_delimiter = f.value("target_delimiter", " ");
    s.fewshot_as_multiturn = f.value("as_multiturn", false);
    s.choice.fewshot_match = f.value("match", "");
  }
  if (doc.contains("generation")) {
    const auto& g = doc["generation"];
    s.until = g.value("until", std::vector<std::string>{});
    s.max_gen_toks = g.value("max_gen_toks", 256);
    s.temperature = g.value("temperature", 0.0);
    s.seed = g.value("seed", 1234);
  }
  if (doc.contains("filters")) {
    for (const auto& p : doc["filters"]) {
      FilterPipeline pipeline{p.at("name").get<std::string>(), {}};
      for (const auto& st : p.at("filter")) {
        FilterStep step;
        step.function = st.at("function").get<std::string>();
        step.pattern = st.value("regex_pattern", "");
        step.group_select = st.value("group_select", 0);
        step.fallback = st.value("fallback", "[invalid]");
        if (step.function == "regex" && step.pattern.empty())
          throw InputError(file.string() + ": filter '" + pipeline.name + "': a regex step needs regex_pattern");
        pipeline.steps.push_back(std::move(step));
      }
      s.filters.push_back(std::move(pipeline));
    }
  }
  if (s.filters.empty())
    s.filters.push_back({"none", {}});
  if (doc.contains("metric")) {
    const auto& m = doc["metric"];
    s.exact_match.ignore_case = m.value("ignore_case", false);
    s.exact_match.ignore_punctuation = m.value("ignore_punctuation", false);
    s.exact_match.ignore_numbers = m.value("ignore_numbers", false);
    s.exact_match.regexes_to_ignore = m.value("regexes_to_ignore", std::vector<std::string>{});
  }
  if (s.scorer == Scorer::multiple_choice)
    load_multiple_choice(file, doc, s);
  if (s.scorer == Scorer::exact_match && s.target_template.empty())
    throw InputError(file.string() + ": scorer exact_match needs doc_to_target (the reference answer)");
  return s;
}

std::vector<std::string>
list_task_suites() {
  return bundled_yaml_names(suites_directory());
}

TaskSuite
resolve_task_suite(const std::string& name_or_path) {
  return load_task_suite(resolve_bundled_yaml(name_or_path, suites_directory(), "--suite", "suite"));
}

std::string
to_string(Scorer scorer) {
  switch (scorer) {
  case Scorer::exact_match:
    return "exact_match";
  case Scorer::ifeval:
    return "ifeval";
  case Scorer::do_not_answer:
    return "do_not_answer";
  case Scorer::perplexity:
    return "perplexity";
  case Scorer::multiple_choice:
    return "multiple_choice";
  }
  return "?";
}

nlohmann::json
to_json(const TaskSuite& s) {
  nlohmann::json filters = nlohmann::json::array();
  for (const auto& f : s.filters)
    filters.push_back(f.name);
  return {{"name", s.name},
          {"version", s.version},
          {"file", s.file.string()},
          {"scorer", to_string(s.scorer)},
          {"api", s.api == SuiteApi::chat ? "chat" : "completions"},
          {"data", s.data.string()},
          {"num_fewshot", s.num_fewshot},
          {"fewshot", s.fewshot.string()},
          {"fewshot_sampler", s.fewshot_sampler},
          {"until", s.until},
          {"max_gen_toks", s.max_gen_toks},
          {"temperature", s.temperature},
          {"seed", s.seed},
          {"filters", filters}};
}

} // namespace optkit::eval
