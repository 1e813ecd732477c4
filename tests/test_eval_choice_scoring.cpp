// Multiple-choice metrics as lm-eval computes them. The acc cases are lm-eval's
// (tests/test_metrics.py: three choices, target 1); acc_norm divides by the choice's length in
// characters (Python's len), acc_bytes by its UTF-8 bytes; mc2 is TruthfulQA's true probability
// mass; a breakdown field adds per-value and per-group metrics.
#include "eval/choice_scoring.hpp"
#include "eval/paired_statistics.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace optkit::eval;

namespace {

TaskSuite
suite(std::vector<std::string> metrics) {
  TaskSuite s;
  s.name = "t";
  s.scorer = Scorer::multiple_choice;
  s.choice.metrics = std::move(metrics);
  return s;
}

ChoiceItem
item(std::vector<std::string> choices, std::size_t gold) {
  ChoiceItem i;
  i.choices = std::move(choices);
  i.gold = gold;
  for (const auto& c : i.choices)
    i.requests.push_back({"ctx", " " + c});
  return i;
}

double
metric(const SuiteScores& s, const std::string& name) {
  for (const auto& m : s.metrics)
    if (m.name == name)
      return m.mean();
  FAIL("no metric " << name);
  return NAN;
}

// Two-choice items of the given subjects, answered right (choice 0 most likely) or wrong.
SuiteScores
score_subjects(const TaskSuite& s, const std::vector<std::pair<std::string, bool>>& rows) {
  std::vector<ChoiceItem> items;
  std::vector<double> lls;
  for (const auto& [subject, right] : rows) {
    items.push_back(item({"A", "B"}, 0));
    items.back().breakdown = subject;
    lls.push_back(right ? -1.0 : -2.0);
    lls.push_back(-1.5);
  }
  return score_multiple_choice(s, items, lls);
}

} // namespace

TEST_CASE("acc: the most likely choice against target 1 (lm-eval's cases)") {
  const auto s = suite({"acc"});
  CHECK(metric(score_multiple_choice(s, {item({"A", "B", "C"}, 1)}, {-2.0, -1.0, -3.0}), "acc") == 1.0);
  CHECK(metric(score_multiple_choice(s, {item({"A", "B", "C"}, 1)}, {-1.0, -2.0, -3.0}), "acc") == 0.0);
}

TEST_CASE("acc_norm divides by characters, acc_bytes by UTF-8 bytes") {
  // "né" is 2 characters and 3 bytes; "abcd" is 4 and 4. Per character: -3/2 = -1.5 vs -4/4 = -1:
  // "abcd" wins. Per byte: -3/3 = -1 vs -4.4/4 = -1.1: "né" wins.
  const auto s = suite({"acc", "acc_norm", "acc_bytes"});
  const auto scores = score_multiple_choice(s, {item({"n\xc3\xa9", "abcd"}, 0)}, {-3.0, -4.4});
  CHECK(metric(scores, "acc") == 1.0);
  CHECK(metric(scores, "acc_norm") == 0.0);
  CHECK(metric(scores, "acc_bytes") == 1.0);
  CHECK(code_points("n\xc3\xa9") == 2);
}

TEST_CASE("mc2: the probability mass on the true choices (those before the first 0 label), reported as acc") {
  auto i = item({"t1", "t2", "f1"}, 0);
  i.mc2_labels = {1, 1, 0};
  const double lls[] = {std::log(0.2), std::log(0.3), std::log(0.5)};
  const auto scores = score_multiple_choice(suite({"mc2"}), {i}, {lls[0], lls[1], lls[2]});
  CHECK(metric(scores, "acc") == doctest::Approx(0.5));
  // Far below exp's range the mass is still a share, not 0/0.
  const auto tiny = score_multiple_choice(suite({"mc2"}), {i}, {-2000.0, -2000.0, -2000.0 + std::log(2.0)});
  CHECK(metric(tiny, "acc") == doctest::Approx(0.5));
}

TEST_CASE("a breakdown field: each metric again per value and per group, weighted by size, in order") {
  auto s = suite({"acc"});
  s.choice.breakdown = "subject";
  s.choice.groups = {{"stem", {"algebra", "physics"}}, {"humanities", {"law"}}};
  const auto scores = score_subjects(
      s, {{"algebra", true}, {"algebra", false}, {"physics", true}, {"law", false}, {"law", false}, {"music", true}});
  std::vector<std::string> names;
  for (const auto& m : scores.metrics)
    names.push_back(m.name);
  CHECK(names == std::vector<std::string>{"acc", "acc,stem", "acc,humanities", "acc,algebra", "acc,law", "acc,music",
                                          "acc,physics"});
  CHECK(metric(scores, "acc") == doctest::Approx(0.5));
  CHECK(metric(scores, "acc,stem") == doctest::Approx(2.0 / 3.0)); // 3 items, not the mean of 0.5 and 1
  CHECK(metric(scores, "acc,humanities") == 0.0);
  CHECK(scores.items[0].answers["prediction"] == 0);
  CHECK(scores.items[1].response == "B");
}

TEST_CASE("group stderr: pooled from the members' as lm-eval's pooled_sample_stderr pools them") {
  // Two subjects of one group: [1, 0] and [1, 1, 0, 0]. Members' stderr: 0.5 and √(1/3)/2.
  // Pooled: √(((2−1)·2·0.25 + (4−1)·4·(1/12)) / (6 − 2) / 6) = √(1.5 / 4 / 6) = 0.25.
  auto s = suite({"acc"});
  s.choice.breakdown = "subject";
  s.choice.groups = {{"stem", {"algebra", "physics"}}};
  const auto scores = score_subjects(s, {{"algebra", true},
                                         {"algebra", false},
                                         {"physics", true},
                                         {"physics", true},
                                         {"physics", false},
                                         {"physics", false}});
  for (const auto& m : scores.metrics) {
    if (m.name == "acc,stem" || m.name == "acc") {
      REQUIRE(m.pooled_stderr);
      CHECK(*m.pooled_stderr == doctest::Approx(0.25));
    }
    if (m.name == "acc,algebra")
      CHECK(m.stderr_value() == doctest::Approx(0.5));
  }
  const double stderrs[] = {0.5, std::sqrt(1.0 / 3.0) / 2};
  const std::size_t sizes[] = {2, 4};
  CHECK(pooled_stderr(stderrs, sizes) == doctest::Approx(0.25));
}
