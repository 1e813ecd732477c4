// The gate: recovery and drop bounds fail only on a significant shortfall; min_score needs no
// baseline; rules naming what was not evaluated, or needing a missing baseline, are input errors.
#include "core/error.hpp"
#include "eval/quality_gate.hpp"
#include "eval/task_report.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace optkit::eval;

namespace {

std::filesystem::path
write_gate(const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("optkit_gate_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << text;
  return path;
}

GateObservation
observed(double base, double cand, double p) {
  PairedComparison c;
  c.baseline_mean = base;
  c.candidate_mean = cand;
  c.recovery = cand / base;
  c.p_value = p;
  return {"arith", "exact_match,strict-match", cand, c};
}

} // namespace

TEST_CASE("a significant shortfall fails; an insignificant one passes") {
  const auto file = write_gate("rules:\n  - suite: arith\n    metric: exact_match,strict-match\n"
                               "    min_recovery: 0.98\n    alpha: 0.05\n");
  const auto gate = load_quality_gate(file);
  auto out = apply_quality_gate(gate, {observed(0.8, 0.2, 1e-9)});
  REQUIRE(out.size() == 1);
  CHECK_FALSE(out[0].passed);
  CHECK(out[0].line().find("FAIL arith exact_match,strict-match: recovery 0.25 < 0.98") == 0);
  CHECK(out[0].line().find("p = 1e-09") != std::string::npos);
  out = apply_quality_gate(gate, {observed(0.8, 0.78, 0.4)});
  CHECK(out[0].passed); // 97.5 % but not significant: noise, not a loss
  out = apply_quality_gate(gate, {observed(0.8, 0.81, 0.9)});
  CHECK(out[0].passed);
  std::filesystem::remove(file);
}

TEST_CASE("max_drop and min_score; alpha 1 fails any shortfall") {
  const auto file = write_gate("rules:\n  - suite: arith\n    metric: exact_match,strict-match\n"
                               "    max_drop: 0.05\n    min_score: 0.5\n    alpha: 1\n");
  const auto gate = load_quality_gate(file);
  const auto out = apply_quality_gate(gate, {observed(0.8, 0.7, 0.3)});
  REQUIRE(out.size() == 2);
  CHECK(out[0].kind == "min_score");
  CHECK(out[0].passed);
  CHECK(out[1].kind == "max_drop");
  CHECK_FALSE(out[1].passed);
  std::filesystem::remove(file);
}

TEST_CASE("lower-is-better metrics: max_increase against the baseline, max_score absolute") {
  const auto file = write_gate("rules:\n  - {suite: arith, metric: nll, max_increase: 0.05}\n"
                               "  - {suite: arith, metric: kl, max_score: 0.01}\n");
  const auto gate = load_quality_gate(file);
  PairedComparison worse;
  worse.baseline_mean = 2.0;
  worse.candidate_mean = 2.3;
  worse.p_value = 1e-6;
  std::vector<GateObservation> seen = {{"arith", "nll", 2.3, worse}, {"arith", "kl", 0.2, std::nullopt}};
  auto out = apply_quality_gate(gate, seen);
  REQUIRE(out.size() == 2);
  CHECK(out[0].kind == "max_increase");
  CHECK_FALSE(out[0].passed);
  CHECK(out[0].line().find("increase 0.3 > 0.05") != std::string::npos);
  CHECK(out[1].kind == "max_score");
  CHECK_FALSE(out[1].passed);
  seen[0].versus_baseline->candidate_mean = 1.9; // better than the baseline
  seen[1].score = 0.001;
  out = apply_quality_gate(gate, seen);
  CHECK(out[0].passed);
  CHECK(out[1].passed);
  std::filesystem::remove(file);
}

TEST_CASE("correction: holm adjusts the p-values across the gate's comparisons") {
  const std::string rules = "  - {suite: arith, metric: a, min_recovery: 0.98}\n"
                            "  - {suite: arith, metric: b, min_recovery: 0.98}\n"
                            "  - {suite: arith, metric: c, min_recovery: 0.98}\n";
  std::vector<GateObservation> seen;
  for (const char* metric : {"a", "b", "c"}) {
    auto o = observed(0.8, 0.7, 0.02); // each 12.5 % down, p 0.02: significant alone, not after ×3
    o.metric = metric;
    seen.push_back(o);
  }
  auto file = write_gate("rules:\n" + rules);
  auto out = apply_quality_gate(load_quality_gate(file), seen);
  CHECK_FALSE(out[0].passed);
  file = write_gate("correction: holm\nrules:\n" + rules);
  out = apply_quality_gate(load_quality_gate(file), seen);
  CHECK(out[0].passed);
  CHECK(*out[0].p_value == doctest::Approx(0.06));
  std::filesystem::remove(file);
}

TEST_CASE("gate errors name the rule") {
  auto file = write_gate("rules:\n  - suite: arith\n    metric: exact_match,strict-match\n");
  CHECK_THROWS_WITH_AS(load_quality_gate(file), doctest::Contains("has no bound"), optkit::InputError);
  file = write_gate("rules:\n  - suite: gsm8k\n    metric: exact_match,strict-match\n    min_score: 0.1\n");
  CHECK_THROWS_WITH_AS(apply_quality_gate(load_quality_gate(file), {observed(0.8, 0.7, 0.3)}),
                       doctest::Contains("did not evaluate"), optkit::InputError);
  file = write_gate("rules:\n  - suite: arith\n    metric: exact_match,strict-match\n    min_recovery: 0.9\n");
  auto no_baseline = observed(0.8, 0.7, 0.3);
  no_baseline.versus_baseline.reset();
  CHECK_THROWS_WITH_AS(apply_quality_gate(load_quality_gate(file), {no_baseline}), doctest::Contains("--baseline"),
                       optkit::InputError);
  file = write_gate("rules:\n  - suite: arith\n    metric: m\n    min_recovry: 0.9\n");
  CHECK_THROWS_WITH_AS(load_quality_gate(file), doctest::Contains("min_recovery"), optkit::InputError);
  std::filesystem::remove(file);
}

TEST_CASE("every kind of rule outcome read back from its JSON writes the same JSON, its line included") {
  const auto file =
      write_gate("rules:\n"
                 "  - {suite: arith, metric: \"exact_match,strict-match\", min_recovery: 0.95, max_drop: 0.02,"
                 " min_score: 0.5, max_score: 0.99}\n"
                 "  - {suite: arith, metric: nll, max_increase: 0.05, alpha: 0.1}\n");
  const auto gate = load_quality_gate(file);
  PairedComparison nll;
  nll.baseline_mean = 2.0;
  nll.candidate_mean = 2.3;
  nll.p_value = 1e-6;
  const auto out = apply_quality_gate(gate, {observed(0.8, 0.7, 1e-3), {"arith", "nll", 2.3, nll}});
  REQUIRE(out.size() == 5);
  for (const auto& o : out) {
    CAPTURE(o.line());
    const auto back = rule_outcome_from_json(to_json(o));
    CHECK(to_json(back) == to_json(o));
    CHECK(back.line() == o.line());
    CHECK(back.passed == o.passed);
  }
  std::filesystem::remove(file);
}

TEST_CASE("the gate report read from an eval tasks result has its rules and each metric's score beside the "
          "baseline's; an ungated result has none") {
  const auto file =
      write_gate("rules:\n  - {suite: arith, metric: \"exact_match,strict-match\", min_recovery: 0.95}\n");
  const auto gate = load_quality_gate(file);
  std::filesystem::remove(file);
  PairedComparison c;
  c.baseline_mean = 0.8;
  c.candidate_mean = 0.7;
  c.recovery = 0.875;
  c.recovery_low = 0.75;
  c.recovery_high = std::nan(""); // an interval the bootstrap could not bound prints as null
  c.p_value = 0.01;
  CandidateResult candidate;
  candidate.label = "model-a";
  SuiteOutcome suite;
  suite.suite = "arith";
  suite.scores.metrics = {{"exact_match,strict-match", {1, 1, 0, 1, 0, 1, 1, 0, 1, 1}}, {"length", {3, 4}}};
  suite.versus_baseline["exact_match,strict-match"] = c;
  candidate.suites = {suite};
  TaskEvalResult result;
  result.candidates = {candidate};
  CHECK_FALSE(gate_report_from_json(to_json(result), "eval.json").has_value());

  result.candidates[0].gate = apply_quality_gate(gate, {{"arith", "exact_match,strict-match", 0.7, c}});
  result.candidates[0].gate_passed = false;
  const auto report = gate_report_from_json(to_json(result), "eval.json");
  REQUIRE(report.has_value());
  CHECK_FALSE(report->passed);
  REQUIRE(report->rules.size() == 1);
  CHECK(report->rules[0].line() == result.candidates[0].gate[0].line());
  REQUIRE(report->scores.size() == 1); // "length" has no baseline
  const auto& s = report->scores[0];
  CHECK(s.suite == "arith");
  CHECK(s.metric == "exact_match,strict-match");
  CHECK(s.score == doctest::Approx(0.7));
  CHECK(s.baseline == 0.8);
  CHECK(s.recovery == 0.875);
  CHECK(s.recovery_low == 0.75);
  CHECK_FALSE(s.recovery_high.has_value());

  CHECK_THROWS_WITH_AS(gate_report_from_json(nlohmann::json{{"candidates", nlohmann::json::array()}}, "eval.json"),
                       doctest::Contains("eval.json: field /candidates"), optkit::InputError);
}
