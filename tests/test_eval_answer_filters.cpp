// lm-eval's GSM8K answer extraction and exact_match, pinned case by case from the rules in
// ../shared/reference/compress-eval-anchors.md §4.1 (regexes, group_select, "[invalid]",
// regexes_to_ignore, case folding).
#include "eval/answer_filters.hpp"

#include <doctest/doctest.h>

using namespace optkit::eval;

namespace {

FilterPipeline
strict() {
  return {"strict-match", {{"regex", R"(#### (\-?[0-9\.\,]+))", 0, "[invalid]"}, {"take_first", "", 0, ""}}};
}

FilterPipeline
flexible() {
  return {"flexible-extract",
          {{"regex", R"((-?[$0-9.,]{2,})|(-?[0-9]+))", -1, "[invalid]"}, {"take_first", "", 0, ""}}};
}

ExactMatch
gsm8k_metric() {
  ExactMatchOptions o;
  o.ignore_case = true;
  o.regexes_to_ignore = {",", R"(\$)", "(?s).*#### ", R"(\.$)"};
  return ExactMatch(o);
}

} // namespace

TEST_CASE("strict-match takes the first '#### N'; nothing matching gives [invalid]") {
  const AnswerFilter f(strict());
  CHECK(f.apply("She has 3 + 4 = 7.\n#### 7") == "7");
  CHECK(f.apply("#### 1,234.\nmore\n#### 9") == "1,234.");
  CHECK(f.apply("#### -5") == "-5");
  CHECK(f.apply("The answer is 7") == "[invalid]");
  CHECK(f.apply("") == "[invalid]");
  CHECK(f.apply("####7") == "[invalid]"); // the space is part of the pattern
}

TEST_CASE("flexible-extract takes the last number; a tuple match gives its non-empty group") {
  const AnswerFilter f(flexible());
  CHECK(f.apply("3 + 4 = 7 apples, then 12") == "12");
  CHECK(f.apply("It costs $1,200.") == "$1,200.");
  CHECK(f.apply("I think 5") == "5"); // second alternative (single digit)
  CHECK(f.apply("values 10 and 2") == "2");
  CHECK(f.apply("no numbers here") == "[invalid]");
  CHECK(f.apply("-3 degrees") == "-3");
}

TEST_CASE("exact_match drops ',', '$', everything through '#### ' and a final '.', then folds case") {
  const auto m = gsm8k_metric();
  const std::string reference = "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72";
  CHECK(m.normalize(reference) == "72");
  CHECK(m.matches("72", reference));
  CHECK(m.matches("72.", reference));
  CHECK(m.matches("$72", reference));
  CHECK_FALSE(m.matches("72.0", reference));
  CHECK_FALSE(m.matches("[invalid]", reference));
  CHECK(m.matches("1,234", "#### 1234"));
  CHECK(m.normalize("A\n#### B\n#### C") == "c"); // greedy across lines: the last '#### ' wins
  CHECK(m.normalize("1.\n2.") == "1.\n2");        // Python's $ without MULTILINE: the end only
}

TEST_CASE("the whole pipeline: strict and flexible disagree on an answer without ####") {
  const auto m = gsm8k_metric();
  const std::string reference = "#### 18";
  const std::string response = " Janet has 16 - 3 - 4 = 9 eggs. She makes 9 * 2 = 18 dollars.";
  CHECK_FALSE(m.matches(AnswerFilter(strict()).apply(response), reference));
  CHECK(m.matches(AnswerFilter(flexible()).apply(response), reference));
}

TEST_CASE("case and whitespace steps") {
  const AnswerFilter f({"x", {{"lowercase", "", 0, ""}, {"remove_whitespace", "", 0, ""}}});
  CHECK(f.apply("  The ANSWER") == "the answer");
  const AnswerFilter s({"y", {{"strip", "", 0, ""}, {"uppercase", "", 0, ""}}});
  CHECK(s.apply("\n yes \t") == "YES");
}

TEST_CASE("gsm8k_cot's strict pattern: 'The answer is N.' — the final '.' is any character") {
  const AnswerFilter cot({"strict-match", {{"regex", R"(The answer is (\-?[0-9\.\,]+).)", 0, "[invalid]"}}});
  CHECK(cot.apply("So 5 + 4 = 9. The answer is 9.") == "9");
  CHECK(cot.apply("The answer is 1,000!") == "1,000");
  CHECK(cot.apply("The answer is 9") == "[invalid]");  // nothing for the trailing '.' to match
  CHECK(cot.apply("the answer is 9.") == "[invalid]"); // case-sensitive
}
