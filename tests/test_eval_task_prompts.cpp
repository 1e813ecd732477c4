// Prompts as lm-eval builds them: description + exemplars (text + target_delimiter + target,
// each followed by fewshot_delimiter) + the document's text; random exemplars drawn by
// random.Random(seed).sample per document in order; chat as one message or one turn per exemplar.
#include "eval/task_prompts.hpp"
#include "eval/task_suite.hpp"

#include <doctest/doctest.h>

using namespace optkit::eval;

namespace {

TaskSuite
suite(int shots, const std::string& sampler) {
  TaskSuite s;
  s.name = "t";
  s.prompt_template = "Question: {{question}}\nAnswer:";
  s.target_template = "{{answer}}";
  s.num_fewshot = shots;
  s.fewshot_sampler = sampler;
  s.until = {"Question:"};
  s.max_gen_toks = 32;
  return s;
}

std::vector<Document>
numbered(int n) {
  std::vector<Document> docs;
  for (int i = 0; i < n; ++i)
    docs.push_back(
        {{"question", "q" + std::to_string(i)}, {"answer", "a" + std::to_string(i) + "\n#### " + std::to_string(i)}});
  return docs;
}

} // namespace

TEST_CASE("first_n few-shot context, byte for byte") {
  const auto items = build_task_items(suite(2, "first_n"), numbered(1), numbered(3));
  REQUIRE(items.size() == 1);
  CHECK(items[0].prompt ==
        "Question: q0\nAnswer: a0\n#### 0\n\nQuestion: q1\nAnswer: a1\n#### 1\n\nQuestion: q0\nAnswer:");
  CHECK(items[0].target == "a0\n#### 0");
  const auto body = request_body(suite(2, "first_n"), items[0]);
  CHECK(body["max_tokens"] == 32);
  CHECK(body["temperature"] == 0.0);
  CHECK(body["seed"] == 1234);
  CHECK(body["stop"] == nlohmann::json::array({"Question:"}));
}

TEST_CASE("random few-shot draws the exemplars random.Random(1234).sample would, document after document") {
  // random.Random(1234): sample(range(7473), 5) three times = the lists in test_eval_python_random.
  const auto items = build_task_items(suite(5, "random"), numbered(2), numbered(7473));
  CHECK(items[0].prompt.rfind("Question: q6374\n", 0) == 0);
  CHECK(items[1].prompt.rfind("Question: q7462\n", 0) == 0);
}

TEST_CASE("chat: one user message, or a turn per exemplar with as_multiturn") {
  auto s = suite(1, "first_n");
  s.api = SuiteApi::chat;
  auto items = build_task_items(s, numbered(1), numbered(2));
  REQUIRE(items[0].messages.size() == 1);
  CHECK(items[0].messages[0]["content"] == "Question: q0\nAnswer: a0\n#### 0\n\nQuestion: q0\nAnswer:");
  s.fewshot_as_multiturn = true;
  s.description_text = "Solve.";
  items = build_task_items(s, numbered(1), numbered(2));
  REQUIRE(items[0].messages.size() == 4);
  CHECK(items[0].messages[0]["role"] == "system");
  CHECK(items[0].messages[2]["role"] == "assistant");
  CHECK(items[0].messages[2]["content"] == "a0\n#### 0");
  CHECK(request_body(s, items[0]).contains("messages"));
}

TEST_CASE("gsm8k_cot's target: the number after ####, or the exemplar's target") {
  auto s = suite(0, "first_n");
  s.target_template = "{{ answer.split('####')[-1].strip() if answer is defined else target }}";
  const auto items = build_task_items(s, numbered(1), {});
  CHECK(items[0].target == "0");
  const std::vector<Document> exemplar = {{{"question", "q"}, {"target", "The answer is 6."}}};
  CHECK(build_task_items(s, exemplar, {})[0].target == "The answer is 6.");
}

TEST_CASE("--system-instruction: before the description, joined by the few-shot delimiter (lm-eval)") {
  auto s = suite(1, "first_n");
  s.description_text = "Solve.";
  PromptOptions options;
  options.system_instruction = "Be brief.";
  auto items = build_task_items(s, numbered(1), numbered(2), options);
  CHECK(items[0].prompt == "Be brief.\n\nSolve.Question: q0\nAnswer: a0\n#### 0\n\nQuestion: q0\nAnswer:");
  s.api = SuiteApi::chat; // a chat suite: the system prompt is the system message, the rest one user turn
  items = build_task_items(s, numbered(1), numbered(2), options);
  REQUIRE(items[0].messages.size() == 2);
  CHECK(items[0].messages[0]["content"] == "Be brief.\n\nSolve.");
  CHECK(items[0].messages[1]["content"] == "Question: q0\nAnswer: a0\n#### 0\n\nQuestion: q0\nAnswer:");
}

TEST_CASE("--apply-chat-template: the conversation rendered with the model's template into a completions prompt") {
  const auto tmpl = optkit::model::parse_chat_template(
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}",
      "t.jinja");
  auto s = suite(1, "first_n");
  PromptOptions options;
  options.chat_template = &tmpl;
  auto items = build_task_items(s, numbered(1), numbered(2), options);
  CHECK(items[0].prompt == "<user>Question: q0\nAnswer: a0\n#### 0\n\nQuestion: q0\nAnswer:</user><assistant>");
  s.fewshot_as_multiturn = true;
  items = build_task_items(s, numbered(1), numbered(2), options);
  CHECK(items[0].prompt == "<user>Question: q0\nAnswer:</user><assistant>a0\n#### 0</assistant><user>Question: "
                           "q0\nAnswer:</user><assistant>");
}
