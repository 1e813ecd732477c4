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
  CHECK_THROWS_WITH_AS(resolve_task_suite("gsm9k"), doctest::Contains("bundled: arith"), optkit::InputError);
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
