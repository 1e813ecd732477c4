// Multiple-choice requests as lm-eval builds them from the bundled suites' YAML (the task
// definitions of lm-eval's default YAMLs): prompt + " " + choice, Winogrande's multiple-input
// mode, MMLU's description and same-subject exemplars, HellaSwag's preprocessing (expected
// strings computed with lm-eval's Python preprocess()), TruthfulQA's primer and mc2 labels.
#include "eval/choice_items.hpp"
#include "eval/document_preprocessors.hpp"

#include "core/error.hpp"

#include <doctest/doctest.h>

using namespace optkit::eval;

namespace {

std::vector<Document>
one(const char* json) {
  return {Document::parse(json)};
}

} // namespace

TEST_CASE("arc_easy: the answer texts after the question; the target is the answer key's position among labels") {
  const auto s = resolve_task_suite("arc_easy");
  const auto items = build_choice_items(
      s, one(R"({"id": "x", "question": "Which is hot?", "choices": {"text": ["ice", "fire"], "label": ["1", "2"]},
              "answerKey": "2"})"),
      {});
  REQUIRE(items.size() == 1);
  CHECK(items[0].gold == 1);
  CHECK(items[0].choices == std::vector<std::string>{"ice", "fire"});
  CHECK(items[0].requests[1].context == "Question: Which is hot?\nAnswer:");
  CHECK(items[0].requests[1].continuation == " fire");
  CHECK_FALSE(items[0].multiple_input);
}

TEST_CASE("hellaswag: lm-eval's preprocess(), the query and the endings") {
  CHECK(hellaswag_clean("  Making tea [title] Boil water. [step] Pour it.  ") == "Making tea. Boil water. Pour it.");
  CHECK(hellaswag_clean("a [b\nc] d [e") == "a [b\nc] d [e"); // "." does not cross a newline; unclosed stays
  CHECK(hellaswag_clean("x   y") == "x  y");                  // one pass of "  " -> " ", as str.replace
  CHECK(hellaswag_clean("[header] How to [title] Go") == " How to. Go");
  const auto items = build_choice_items(resolve_task_suite("hellaswag"),
                                        one(R"({"activity_label": "Tea", "ctx_a": "A man boils water.", "ctx_b": "hE",
              "endings": ["pours it [step] slowly.", "eats it."], "label": "0"})"),
                                        {});
  REQUIRE(items.size() == 1);
  CHECK(items[0].requests[0].context == "Tea: A man boils water. He");
  CHECK(items[0].requests[0].continuation == " pours it slowly.");
  CHECK(items[0].gold == 0);
}

TEST_CASE("winogrande: multiple-input mode, one context per option and the rest of the sentence after each") {
  const auto items =
      build_choice_items(resolve_task_suite("winogrande"),
                         one(R"({"sentence": "The cup hit the jar and the _ broke apart.", "option1": "cup",
                                 "option2": "jar", "answer": "2"})"),
                         {});
  REQUIRE(items.size() == 1);
  CHECK(items[0].multiple_input);
  CHECK(items[0].gold == 1);
  CHECK(items[0].requests[0].context == "The cup hit the jar and the cup");
  CHECK(items[0].requests[1].context == "The cup hit the jar and the jar");
  CHECK(items[0].requests[0].continuation == " broke apart.");
  CHECK(items[0].requests[1].continuation == " broke apart.");
}

TEST_CASE("mmlu: the subject's description, lettered answers, exemplars of the same subject first") {
  auto s = resolve_task_suite("mmlu");
  s.num_fewshot = 1;
  const auto doc = one(R"({"question": " What is 2+2? ", "subject": "elementary_mathematics",
                           "choices": ["3", "4", "5", "6"], "answer": 1})");
  std::vector<Document> dev;
  dev.push_back(Document::parse(
      R"({"question": "Law?", "subject": "international_law", "choices": ["a", "b", "c", "d"], "answer": 0})"));
  dev.push_back(Document::parse(
      R"({"question": "1+1?", "subject": "elementary_mathematics", "choices": ["2", "3", "4", "5"], "answer": 0})"));
  const auto items = build_choice_items(s, doc, dev);
  REQUIRE(items.size() == 1);
  CHECK(items[0].breakdown == "elementary_mathematics");
  CHECK(items[0].requests[0].context ==
        "The following are multiple choice questions (with answers) about elementary mathematics.\n\n"
        "1+1?\nA. 2\nB. 3\nC. 4\nD. 5\nAnswer: A\n\n"
        "What is 2+2?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer:");
  CHECK(items[0].requests[3].continuation == " D");
  CHECK(items[0].gold == 1);
  s.num_fewshot = 2; // one exemplar of this subject only
  CHECK_THROWS_AS(build_choice_items(s, doc, dev), optkit::InputError);
}

TEST_CASE("truthfulqa: the QA primer, the correct answer first, mc2's labels") {
  const auto doc = one(R"({"question": "Is ice cold?", "mc1_targets": {"choices": ["Yes.", "No."], "labels": [1, 0]},
                           "mc2_targets": {"choices": ["Yes.", "It is.", "No."], "labels": [1, 1, 0]}})");
  const auto mc2 = build_choice_items(resolve_task_suite("truthfulqa_mc2"), doc, {});
  REQUIRE(mc2.size() == 1);
  CHECK(mc2[0].mc2_labels == std::vector<int>{1, 1, 0});
  CHECK(mc2[0].requests[0].context.starts_with("Q: What is human life expectancy in the United States?\nA: Human"));
  CHECK(mc2[0].requests[0].context.ends_with(
      "A: The 1992 Olympics were held in Barcelona, Spain.\n\nQ: Is ice cold?\nA:"));
  const auto mc1 = build_choice_items(resolve_task_suite("truthfulqa_mc1"), doc, {});
  CHECK(mc1[0].choices == std::vector<std::string>{"Yes.", "No."});
  CHECK(mc1[0].gold == 0);
}

TEST_CASE("errors name the document and what is wrong") {
  const auto s = resolve_task_suite("piqa");
  CHECK_THROWS_WITH_AS(build_choice_items(s, one(R"({"goal": "g", "sol1": "a", "sol2": "b", "label": 2})"), {}),
                       doctest::Contains("document 0: doc_to_target 2 is not one of the 2 choices"),
                       optkit::InputError);
  auto arc = resolve_task_suite("arc_easy");
  CHECK_THROWS_WITH_AS(build_choice_items(arc, one(R"({"question": "q", "choices": "ab", "answerKey": "A"})"), {}),
                       doctest::Contains("document 0"), optkit::InputError);
  CHECK_THROWS_AS(build_choice_items(resolve_task_suite("hellaswag"), one(R"({"ctx_a": "x"})"), {}),
                  optkit::InputError);
}

TEST_CASE("--apply-chat-template: the rendered conversation is the context, the bare choice the continuation") {
  const auto tmpl = optkit::model::parse_chat_template(
      "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{% if add_generation_prompt %}[assistant]{% "
      "endif %}",
      "t.jinja");
  PromptOptions options;
  options.chat_template = &tmpl;
  options.system_instruction = "Answer with a letter.";
  const auto items = build_choice_items(
      resolve_task_suite("mmlu"),
      one(R"({"question": "2+2?", "subject": "elementary_mathematics", "choices": ["3", "4", "5", "6"], "answer": 1})"),
      {}, options);
  CHECK(items[0].requests[1].context ==
        "[system]Answer with a letter.\n\nThe following are multiple choice questions (with answers) about elementary "
        "mathematics.\n\n[user]2+2?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer:[assistant]");
  CHECK(items[0].requests[1].continuation == "B");
  CHECK_THROWS_WITH_AS(
      build_choice_items(resolve_task_suite("winogrande"),
                         one(R"({"sentence": "a _ b", "option1": "x", "option2": "y", "answer": "1"})"), {}, options),
      doctest::Contains("multiple-input"), optkit::InputError);
}
