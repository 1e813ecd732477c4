// The bundled suites load and say what lm-eval's tasks say; a user's suite with a mistake gets a
// file:line:col error.
#include "core/error.hpp"
#include "eval/task_suite.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace optkit::eval;

TEST_CASE("bundled suites") {
  const auto names = list_task_suites();
  for (const char* name : {"arith", "gsm8k", "gsm8k_chat", "gsm8k_cot", "ifeval", "do_not_answer", "perplexity"})
    CHECK(std::find(names.begin(), names.end(), name) != names.end());
  const auto gsm8k = resolve_task_suite("gsm8k");
  CHECK(gsm8k.num_fewshot == 5);
  CHECK(gsm8k.fewshot_sampler == "random");
  CHECK(gsm8k.until == std::vector<std::string>{"Question:", "</s>", "<|im_end|>"});
  REQUIRE(gsm8k.filters.size() == 2);
  CHECK(gsm8k.filters[1].steps[0].group_select == -1);
  CHECK(gsm8k.exact_match.regexes_to_ignore.size() == 4);
  const auto arith = resolve_task_suite("arith");
  CHECK(std::filesystem::exists(arith.data));
  CHECK(resolve_task_suite("ifeval").scorer == Scorer::ifeval);
  CHECK(resolve_task_suite("gsm8k_chat").fewshot_as_multiturn);
  const auto ppl = resolve_task_suite("perplexity");
  CHECK(ppl.scorer == Scorer::perplexity);
  CHECK(ppl.ppl_ctx == 512);
  CHECK_THROWS_WITH_AS(resolve_task_suite("gsm9k"), doctest::Contains("bundled: arc_challenge, arc_easy, arith"),
                       optkit::InputError);
}

TEST_CASE("bundled multiple-choice suites: each loads, with its sample") {
  for (const char* name : {"arc_easy", "arc_challenge", "hellaswag", "winogrande", "piqa", "truthfulqa_mc1",
                           "truthfulqa_mc2", "mmlu", "mmlu_continuation"}) {
    const auto s = resolve_task_suite(name);
    CHECK(s.scorer == Scorer::multiple_choice);
    CHECK(std::filesystem::exists(s.data));
  }
  const auto mmlu = resolve_task_suite("mmlu");
  CHECK(mmlu.choice.breakdown == "subject");
  REQUIRE(mmlu.choice.groups.size() == 4);
  std::size_t subjects = 0;
  for (const auto& g : mmlu.choice.groups)
    subjects += g.members.size();
  CHECK(subjects == 57);
  CHECK(mmlu.choice.fewshot_match == "subject");
  CHECK(resolve_task_suite("truthfulqa_mc2").choice.metrics == std::vector<std::string>{"mc2"});
}

TEST_CASE("a multiple-choice suite refuses the chat API, unknown metrics and mc2 without labels") {
  const auto path = std::filesystem::temp_directory_path() / ("optkit_mc_" + std::to_string(::getpid()) + ".yaml");
  const std::string head = "name: mc\nscorer: multiple_choice\ndoc_to_text: \"{{q}}\"\ndoc_to_target: \"{{a}}\"\n";
  std::ofstream(path) << head << "doc_to_choice: \"{{c}}\"\napi: chat\n";
  CHECK_THROWS_WITH_AS(load_task_suite(path), doctest::Contains("no prompt logprobs"), optkit::InputError);
  std::ofstream(path) << head << "doc_to_choice: \"{{c}}\"\nmetrics: [acc, f1]\n";
  CHECK_THROWS_WITH_AS(load_task_suite(path), doctest::Contains("unknown 'f1'"), optkit::InputError);
  std::ofstream(path) << head << "doc_to_choice: \"{{c}}\"\nmetrics: [mc2]\n";
  CHECK_THROWS_WITH_AS(load_task_suite(path), doctest::Contains("mc2_labels"), optkit::InputError);
  std::ofstream(path) << head;
  CHECK_THROWS_WITH_AS(load_task_suite(path), doctest::Contains("doc_to_choice"), optkit::InputError);
  std::filesystem::remove(path);
}

TEST_CASE("a user's suite: errors name the file and the key") {
  const auto path = std::filesystem::temp_directory_path() / ("optkit_suite_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << "name: mine\nscorer: exact_match\ndoc_to_text: \"{{q}}\"\n";
  CHECK_THROWS_WITH_AS(load_task_suite(path), doctest::Contains("doc_to_target"), optkit::InputError);
  std::ofstream(path) << "name: mine\nscorer: exact_macth\ndoc_to_text: \"{{q}}\"\n";
  const std::string where = path.string() + ":2";
  CHECK_THROWS_WITH_AS(load_task_suite(path), doctest::Contains(where.c_str()), optkit::InputError);
  std::ofstream(path) << "name: mine\nscorer: exact_match\ndoc_to_text: \"{{q}}\"\ndoc_to_target: \"{{a}}\"\n"
                         "filters:\n  - name: f\n    filter:\n      - function: regex\n";
  CHECK_THROWS_WITH_AS(load_task_suite(path), doctest::Contains("regex_pattern"), optkit::InputError);
  std::filesystem::remove(path);
}
