#include "eval/task_report.hpp"

#include "core/json_fields.hpp"

#include <fmt/format.h>

#include <cmath>

namespace optkit::eval {

namespace {

nlohmann::json
number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

nlohmann::json
metric_json(const SuiteOutcome& s, const MetricScores& m) {
  nlohmann::json j = {{"metric", m.name},
                      {"n", m.items.size()},
                      {"score", m.mean()},
                      {"stderr", m.reports_stderr ? number_or_null(m.stderr_value()) : nlohmann::json(nullptr)}};
  if (const auto it = s.versus_baseline.find(m.name); it != s.versus_baseline.end()) {
    const auto& c = it->second;
    j["baseline"] = c.baseline_mean;
    j["recovery"] = number_or_null(c.recovery);
    j["recovery_ci"] = {number_or_null(c.recovery_low), number_or_null(c.recovery_high)};
    j["p_value"] = c.p_value;
    j["test"] = c.binary ? "exact McNemar" : "paired bootstrap";
    if (c.binary)
      j["discordant"] = {{"baseline_only", c.mcnemar.baseline_only}, {"candidate_only", c.mcnemar.candidate_only}};
  }
  if (const auto it = s.across_repeats.find(m.name); it != s.across_repeats.end())
    j["repeats"] = {{"mean", it->second.mean}, {"std", it->second.stddev}, {"rsd", number_or_null(it->second.rsd)}};
  return j;
}

nlohmann::json
candidate_json(const CandidateResult& c) {
  nlohmann::json suites = nlohmann::json::array();
  for (const auto& s : c.suites) {
    nlohmann::json metrics = nlohmann::json::array();
    for (const auto& m : s.scores.metrics)
      metrics.push_back(metric_json(s, m));
    nlohmann::json j = {{"suite", s.suite}, {"documents", s.documents}, {"cached", s.cached}, {"metrics", metrics}};
    if (!s.scores.details.is_null())
      j["details"] = s.scores.details;
    if (s.identical_fraction)
      j["identical_fraction"] = *s.identical_fraction;
    if (!s.reasoning_end.empty())
      j["reasoning"] = {{"end_marker", s.reasoning_end}, {"unclosed", s.reasoning_unclosed}};
    suites.push_back(std::move(j));
  }
  nlohmann::json j = {{"model", c.label}, {"served_as", c.model_name}, {"seconds", c.seconds}, {"suites", suites}};
  if (!c.gate.empty()) {
    nlohmann::json rules = nlohmann::json::array();
    for (const auto& o : c.gate)
      rules.push_back(to_json(o));
    j["gate"] = {{"passed", c.gate_passed}, {"rules", rules}};
  }
  return j;
}

} // namespace

Table
task_score_table(const TaskEvalResult& result) {
  Table t({"model", "suite", "metric", "n", "score", "stderr", "recovery", "95% CI", "p"});
  for (const auto& c : result.candidates)
    for (const auto& s : c.suites)
      for (const auto& m : s.scores.metrics) {
        const auto j = metric_json(s, m);
        nlohmann::json ci = nullptr;
        if (j.contains("recovery_ci") && !j["recovery_ci"][0].is_null())
          ci = fmt::format("{:.3f}–{:.3f}", j["recovery_ci"][0].get<double>(), j["recovery_ci"][1].get<double>());
        t.add_row({c.label, s.suite, m.name, m.items.size(), std::round(m.mean() * 1e4) / 1e4,
                   j["stderr"].is_null() ? nlohmann::json(nullptr)
                                         : nlohmann::json(std::round(j["stderr"].get<double>() * 1e4) / 1e4),
                   j.contains("recovery") && !j["recovery"].is_null()
                       ? nlohmann::json(std::round(j["recovery"].get<double>() * 1e4) / 1e4)
                       : nlohmann::json(nullptr),
                   ci,
                   j.contains("p_value") ? nlohmann::json(fmt::format("{:.3g}", j["p_value"].get<double>()))
                                         : nlohmann::json(nullptr)});
      }
  return t;
}

Table
trial_spread_table(const TaskEvalResult& result) {
  Table t({"suite", "metric", "trials", "mean", "std", "rsd"});
  for (const auto& m : result.across_trials)
    t.add_row({m.suite, m.metric, m.spread.trials, m.spread.mean, m.spread.stddev, number_or_null(m.spread.rsd)});
  return t;
}

Table
repeat_table(const TaskEvalResult& result) {
  Table t({"model", "suite", "metric", "identical responses", "mean", "std", "rsd"});
  for (const auto& c : result.candidates)
    for (const auto& s : c.suites)
      for (const auto& [metric, spread] : s.across_repeats)
        t.add_row({c.label, s.suite, metric,
                   s.identical_fraction ? nlohmann::json(*s.identical_fraction) : nlohmann::json(nullptr), spread.mean,
                   spread.stddev, number_or_null(spread.rsd)});
  return t;
}

std::string
task_report_notes(const TaskEvalResult& result, bool color) {
  std::string text;
  if (const auto spread = trial_spread_table(result); spread.size() > 0)
    text += "\nacross trials:\n" + spread.render_text(color);
  if (const auto repeats = repeat_table(result); repeats.size() > 0)
    text += "\nacross repeats:\n" + repeats.render_text(color);
  for (const auto& c : result.candidates)
    for (const auto& s : c.suites)
      if (!s.reasoning_end.empty())
        text += fmt::format("{}{}: {} of {} answers never closed their reasoning ({}): scored as written\n",
                            result.candidates.size() > 1 ? c.label + ": " : std::string(), s.suite,
                            s.reasoning_unclosed, s.documents, s.reasoning_end);
  for (const auto& c : result.candidates)
    for (const auto& rule : c.gate)
      text += (result.candidates.size() > 1 ? c.label + ": " : std::string()) + rule.line() + "\n";
  return text;
}

namespace {

std::optional<double>
optional_number(const nlohmann::json& j) {
  return j.is_number() ? std::optional<double>(j.get<double>()) : std::nullopt;
}

std::vector<ScoreVersusBaseline>
scores_versus_baseline(const nlohmann::json& candidate) {
  std::vector<ScoreVersusBaseline> scores;
  for (const auto& suite : candidate.at("suites"))
    for (const auto& m : suite.at("metrics")) {
      if (!m.contains("baseline"))
        continue;
      const auto& ci = m.at("recovery_ci");
      scores.push_back({suite.at("suite").get<std::string>(), m.at("metric").get<std::string>(),
                        m.at("score").get<double>(), m.at("baseline").get<double>(), optional_number(m.at("recovery")),
                        optional_number(ci.at(0)), optional_number(ci.at(1))});
    }
  return scores;
}

} // namespace

std::optional<GateReport>
gate_report_from_json(const nlohmann::json& result, const std::string& source) {
  return read_json_fields(source, [&]() -> std::optional<GateReport> {
    const auto& candidate = result.at("candidates").at(0);
    if (!candidate.contains("gate"))
      return std::nullopt;
    GateReport report;
    report.passed = candidate.at("gate").at("passed").get<bool>();
    for (const auto& rule : candidate.at("gate").at("rules"))
      report.rules.push_back(rule_outcome_from_json(rule));
    report.scores = scores_versus_baseline(candidate);
    return report;
  });
}

nlohmann::json
to_json(const TaskEvalResult& result) {
  nlohmann::json candidates = nlohmann::json::array();
  for (const auto& c : result.candidates)
    candidates.push_back(candidate_json(c));
  nlohmann::json j = {{"candidates", candidates}};
  if (result.baseline)
    j["baseline"] = candidate_json(*result.baseline);
  if (!result.baseline_source.empty())
    j["baseline_source"] = result.baseline_source;
  if (!result.across_trials.empty()) {
    nlohmann::json spread = nlohmann::json::array();
    for (const auto& m : result.across_trials)
      spread.push_back({{"suite", m.suite},
                        {"metric", m.metric},
                        {"trials", m.spread.trials},
                        {"mean", m.spread.mean},
                        {"std", m.spread.stddev},
                        {"rsd", number_or_null(m.spread.rsd)}});
    j["across_trials"] = spread;
  }
  if (result.gate_given)
    j["gate_passed"] = result.gate_passed;
  return j;
}

std::string
failed_rules_text(const TaskEvalResult& result) {
  std::string text;
  for (const auto& c : result.candidates)
    for (const auto& o : c.gate)
      if (!o.passed)
        text += (text.empty() ? "" : "\n") + (result.candidates.size() > 1 ? c.label + ": " : std::string()) + o.line();
  return text;
}

} // namespace optkit::eval
