// A task suite as lm-evaluation-harness defines one, in a YAML file optkit reads: where the
// documents come from, how a prompt is built (Jinja templates, few-shot exemplars, chat or
// completions), how the model generates (stop strings, token budget, greedy), how an answer is
// extracted (filter pipelines) and how it is scored. Bundled suites live in profiles/suites/;
// users add their own — in-house benchmarks included — without code.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace optkit::eval {

enum class SuiteApi { completions, chat };
enum class Scorer { exact_match, ifeval, do_not_answer, perplexity, multiple_choice };

// One step of an lm-eval filter pipeline.
struct FilterStep {
  std::string function; // "regex" | "take_first" | "lowercase" | "uppercase" | "remove_whitespace" | "strip"
  std::string pattern;  // regex: Python re syntax
  int group_select = 0; // regex: which match (negative counts from the end)
  std::string fallback = "[invalid]";
};

struct FilterPipeline {
  std::string name; // "strict-match", "flexible-extract", "none"
  std::vector<FilterStep> steps;
};

// HF evaluate's exact_match options as lm-eval's task YAML sets them.
struct ExactMatchOptions {
  bool ignore_case = false;
  bool ignore_punctuation = false;
  bool ignore_numbers = false;
  std::vector<std::string> regexes_to_ignore;
};

// multiple_choice: a named subset of the breakdown field's values (MMLU's subject groups).
struct ChoiceGroup {
  std::string name;                 // "stem"
  std::vector<std::string> members; // "abstract_algebra", ...
};

// lm-eval's output_type: multiple_choice — each choice scored by the loglikelihood of
// target_delimiter + choice after the prompt (or, in multiple-input mode, where doc_to_text renders
// an index, of the target after each choice as the context).
struct MultipleChoiceSpec {
  std::string choices;      // doc_to_choice: a field naming a list, or a Jinja expression "{{ ... }}"
  std::string process_docs; // a named preprocessor lm-eval's task ships in Python ("hellaswag"); empty: none
  std::vector<std::string> metrics = {"acc", "acc_norm"}; // acc | acc_norm | acc_bytes | mc2
  std::string mc2_labels;          // mc2: 1/0 per choice, the true ones first (a field or "{{ ... }}")
  std::string breakdown;           // a field whose values each get their own metric (MMLU's subject)
  std::vector<ChoiceGroup> groups; // breakdown values aggregated, weighted by size, as lm-eval's groups
  std::string fewshot_match;       // exemplars are those whose field of this name equals the document's
  int max_length = 2048;           // lm-eval's max_length: context + continuation, left-truncated to max_length − 1
};

struct TaskSuite {
  std::string name;
  int version = 0;
  std::string description_text; // lm-eval's `description`, prepended to every prompt
  std::filesystem::path file;   // where it was read from
  Scorer scorer = Scorer::exact_match;
  SuiteApi api = SuiteApi::completions;

  std::filesystem::path data;       // documents (JSONL, JSON list or CSV); empty: --data must say
  std::vector<std::string> columns; // the fields every document must have (checked before any request)
  std::string prompt_template;      // doc_to_text (Jinja)
  std::string target_template;      // doc_to_target (Jinja); exact_match compares against it
  std::string question_field;       // do_not_answer: the field holding the question (for the judge)
  int num_fewshot = 0;
  std::filesystem::path fewshot;           // exemplar documents; empty: --fewshot must say when num_fewshot > 0
  std::string fewshot_sampler = "first_n"; // first_n | random (Python random.Random(seed).sample per doc)
  int fewshot_seed = 1234;
  std::string fewshot_delimiter = "\n\n";
  std::string target_delimiter = " ";
  bool fewshot_as_multiturn = false; // chat: each exemplar its own user/assistant turn

  std::vector<std::string> until; // stop strings
  int max_gen_toks = 256;
  double temperature = 0;
  int seed = 1234;

  MultipleChoiceSpec choice; // multiple_choice

  std::vector<FilterPipeline> filters; // exact_match: one score per pipeline
  ExactMatchOptions exact_match;

  // perplexity: `eval perplexity` over `data` (a text file) on a local model, per window, with KL
  // against a --baseline folder.
  std::int64_t ppl_ctx = 512;
  std::int64_t ppl_stride = 0; // 0: ctx
  std::int64_t ppl_max_windows = 0;
};

// A bundled suite's name (profiles/suites/NAME.yaml) or a path to a suite YAML. Relative data and
// few-shot paths are resolved against the suite file's folder. InputError (file:line:col) for a
// schema violation; the bundled names are listed when a name is unknown.
TaskSuite resolve_task_suite(const std::string& name_or_path);
TaskSuite load_task_suite(const std::filesystem::path& file);
std::vector<std::string> list_task_suites();

std::string to_string(Scorer scorer);
nlohmann::json to_json(const TaskSuite& suite);

} // namespace optkit::eval
