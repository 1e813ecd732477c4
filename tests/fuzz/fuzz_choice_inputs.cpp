// libFuzzer target: what multiple-choice suites read from outside. The first byte picks what the
// rest is: a document (0) built into requests by suites shaped like the bundled ones — ARC's
// Jinja choices and label index, HellaSwag's preprocessing, Winogrande's multiple-input
// expressions, MMLU's description, breakdown and same-subject exemplars (the document is its own
// exemplar) — and scored on made-up loglikelihoods; a server's completion body (1), read for a
// continuation's echoed logprobs. Each yields a value or an optkit error, never a crash.
#include "core/error.hpp"
#include "eval/choice_items.hpp"
#include "eval/choice_scoring.hpp"
#include "eval/loglikelihood_requests.hpp"
#include "eval/task_requests.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace {

using optkit::eval::TaskSuite;

TaskSuite
suite(const char* name, const char* text, const char* choices, const char* target) {
  TaskSuite s;
  s.name = name;
  s.scorer = optkit::eval::Scorer::multiple_choice;
  s.prompt_template = text;
  s.choice.choices = choices;
  s.target_template = target;
  return s;
}

const std::vector<TaskSuite>&
suites() {
  static const std::vector<TaskSuite> all = [] {
    std::vector<TaskSuite> v;
    v.push_back(
        suite("arc", "Question: {{question}}\nAnswer:", "{{choices.text}}", "{{choices.label.index(answerKey)}}"));
    auto hellaswag = suite("hellaswag", "{{query}}", "choices", "{{label}}");
    hellaswag.choice.process_docs = "hellaswag";
    v.push_back(hellaswag);
    v.push_back(suite("winogrande", "{{ 0 if answer == '1' else 1 }}",
                      "{{ [sentence[:sentence.find('_')] + option1, sentence[:sentence.find('_')] + option2] }}",
                      "{{ sentence[sentence.find('_') + 1:].strip() }}"));
    auto mmlu =
        suite("mmlu", "{{question.strip()}}\nA. {{choices[0]}}\nAnswer:", "{{ ['A', 'B', 'C', 'D'] }}", "answer");
    mmlu.description_text = "About {{ subject | replace('_', ' ') }}.\n\n";
    mmlu.choice.breakdown = "subject";
    mmlu.choice.groups = {{"stem", {"algebra"}}};
    mmlu.choice.fewshot_match = "subject";
    mmlu.num_fewshot = 1;
    v.push_back(mmlu);
    auto mc2 = suite("mc2", "Q: {{question}}\nA:", "{{mc2_targets.choices}}", "0");
    mc2.choice.metrics = {"mc2"};
    mc2.choice.mc2_labels = "{{mc2_targets.labels}}";
    v.push_back(mc2);
    return v;
  }();
  return all;
}

void
build_and_score(const std::string& text) {
  const auto doc = optkit::eval::Document::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return;
  for (const auto& s : suites()) {
    try {
      const auto items = optkit::eval::build_choice_items(s, {doc}, {doc});
      std::vector<double> lls;
      for (const auto& item : items)
        for (std::size_t k = 0; k < item.requests.size(); ++k)
          lls.push_back(-1.0 - static_cast<double>(k % 3));
      optkit::eval::score_multiple_choice(s, items, lls);
    } catch (const optkit::Error&) {
    }
  }
}

} // namespace

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1)
    return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0) {
      build_and_score(text);
    } else {
      optkit::eval::LoglikelihoodRequest request;
      request.context_tokens = 2;
      request.prompt_tokens = 5;
      optkit::eval::continuation_loglikelihood(optkit::eval::parse_generation(text).logprobs, request);
    }
  } catch (const optkit::Error&) {
  }
  return 0;
}
