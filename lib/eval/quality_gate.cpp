#include "eval/quality_gate.hpp"

#include "core/error.hpp"
#include "core/yaml_schema.hpp"

#include <fmt/format.h>

#include <cmath>

namespace optkit::eval {

namespace {

using config::Field;
using config::Schema;
using config::Type;

const Schema&
gate_schema() {
  static const Schema schema = [] {
    Field alpha{"alpha", Type::number, false, "significance level a shortfall must reach to fail (default 0.05)"};
    alpha.minimum = 0;
    alpha.maximum = 1;
    Field rule{"rule", Type::object, true, "one rule"};
    rule.object = std::make_shared<const Schema>(
        Schema{"gate rule",
               {Field{"suite", Type::string, true, "the suite's name"},
                Field{"metric", Type::string, true, "e.g. exact_match,strict-match or prompt_level_strict_acc"},
                Field{"min_recovery", Type::number, false, "fail below this candidate ÷ baseline (0.98 = 98 %)"},
                Field{"max_drop", Type::number, false, "fail when baseline − candidate exceeds this"},
                Field{"max_increase", Type::number, false,
                      "fail when candidate − baseline exceeds this (lower-is-better metrics: nll, kl)"},
                Field{"min_score", Type::number, false, "fail below this score (no baseline, no test)"},
                Field{"max_score", Type::number, false, "fail above this score (no baseline, no test)"}, alpha}});
    Field rules{"rules", Type::list, true, "the rules; all must pass"};
    rules.item = std::make_shared<const Field>(rule);
    return Schema{"quality gate",
                  {rules, Field{"correction",
                                Type::string,
                                false,
                                "none (default) or holm: adjust p-values for the number of comparisons",
                                {"none", "holm"}}}};
  }();
  return schema;
}

std::string
format_p(std::optional<double> p) {
  return p ? fmt::format("p = {:.3g}", *p) : std::string("no test");
}

} // namespace

QualityGate
load_quality_gate(const std::filesystem::path& file) {
  const auto doc = config::load_yaml_file(file, gate_schema());
  QualityGate gate{file, {}, doc.value("correction", "none") == "holm"};
  int index = 0;
  for (const auto& r : doc.at("rules")) {
    ++index;
    GateRule rule;
    rule.suite = r.at("suite").get<std::string>();
    rule.metric = r.at("metric").get<std::string>();
    if (r.contains("min_recovery"))
      rule.min_recovery = r["min_recovery"].get<double>();
    if (r.contains("max_drop"))
      rule.max_drop = r["max_drop"].get<double>();
    if (r.contains("max_increase"))
      rule.max_increase = r["max_increase"].get<double>();
    if (r.contains("min_score"))
      rule.min_score = r["min_score"].get<double>();
    if (r.contains("max_score"))
      rule.max_score = r["max_score"].get<double>();
    rule.alpha = r.value("alpha", 0.05);
    rule.line = index;
    if (!rule.min_recovery && !rule.max_drop && !rule.max_increase && !rule.min_score && !rule.max_score)
      throw InputError(fmt::format("{}: rule {} ({} {}) has no bound: give min_recovery, max_drop, max_increase, "
                                   "min_score or max_score",
                                   file.string(), index, rule.suite, rule.metric));
    gate.rules.push_back(std::move(rule));
  }
  return gate;
}

std::string
RuleOutcome::line() const {
  const char* verdict = passed ? "pass" : "FAIL";
  if (kind == "min_score")
    return fmt::format("{} {} {}: score {:.4g} {} {:.4g}", verdict, rule.suite, rule.metric, observed,
                       passed ? ">=" : "<", bound);
  if (kind == "max_score")
    return fmt::format("{} {} {}: score {:.4g} {} {:.4g}", verdict, rule.suite, rule.metric, observed,
                       passed ? "<=" : ">", bound);
  if (kind == "max_increase")
    return fmt::format("{} {} {}: increase {:.4g} {} {:.4g} ({}, alpha {})", verdict, rule.suite, rule.metric, observed,
                       observed <= bound ? "<=" : ">", bound, format_p(p_value), rule.alpha);
  if (kind == "min_recovery")
    return fmt::format("{} {} {}: recovery {:.4g} {} {:.4g} ({}, alpha {})", verdict, rule.suite, rule.metric, observed,
                       observed >= bound ? ">=" : "<", bound, format_p(p_value), rule.alpha);
  return fmt::format("{} {} {}: drop {:.4g} {} {:.4g} ({}, alpha {})", verdict, rule.suite, rule.metric, observed,
                     observed <= bound ? "<=" : ">", bound, format_p(p_value), rule.alpha);
}

namespace {

const GateObservation&
observation_for(const QualityGate& gate, const GateRule& rule, const std::vector<GateObservation>& observations) {
  for (const auto& o : observations)
    if (o.suite == rule.suite && o.metric == rule.metric)
      return o;
  std::string names;
  for (const auto& o : observations)
    names += (names.empty() ? "" : ", ") + o.suite + " " + o.metric;
  throw InputError(fmt::format("{}: rule {} names {} {}, which this run did not evaluate (it has: {})",
                               gate.file.string(), rule.line, rule.suite, rule.metric, names));
}

bool
compares_with_baseline(const GateRule& rule) {
  return rule.min_recovery || rule.max_drop || rule.max_increase;
}

} // namespace

std::vector<RuleOutcome>
apply_quality_gate(const QualityGate& gate, const std::vector<GateObservation>& observations) {
  // Each comparing rule's p-value, Holm-adjusted across them when the gate asks.
  std::vector<double> p_values;
  std::vector<const GateObservation*> observed; // per rule
  for (const auto& rule : gate.rules) {
    const auto& o = observation_for(gate, rule, observations);
    observed.push_back(&o);
    if (!compares_with_baseline(rule))
      continue;
    if (!o.versus_baseline)
      throw InputError(fmt::format("{}: rule {} ({} {}) compares with a baseline: give --baseline RUN|DIR",
                                   gate.file.string(), rule.line, rule.suite, rule.metric));
    p_values.push_back(o.versus_baseline->p_value);
  }
  if (gate.holm)
    p_values = holm_adjust(p_values);
  std::size_t next_p = 0;
  std::vector<RuleOutcome> outcomes;
  for (std::size_t r = 0; r < gate.rules.size(); ++r) {
    const auto& rule = gate.rules[r];
    const GateObservation* found = observed[r];
    if (rule.min_score) {
      RuleOutcome o{rule, "min_score", found->score, *rule.min_score, std::nullopt, found->score >= *rule.min_score};
      outcomes.push_back(o);
    }
    if (rule.max_score)
      outcomes.push_back(
          {rule, "max_score", found->score, *rule.max_score, std::nullopt, found->score <= *rule.max_score});
    if (compares_with_baseline(rule)) {
      auto cmp = *found->versus_baseline;
      cmp.p_value = p_values[next_p++];
      const bool significant = cmp.p_value < rule.alpha || rule.alpha >= 1;
      if (rule.min_recovery) {
        // A baseline scoring 0 leaves recovery undefined: nothing can have been lost.
        const double recovery = std::isnan(cmp.recovery) ? 1.0 : cmp.recovery;
        const bool short_of = recovery < *rule.min_recovery;
        outcomes.push_back(
            {rule, "min_recovery", recovery, *rule.min_recovery, cmp.p_value, !(short_of && significant)});
      }
      if (rule.max_drop) {
        const double drop = cmp.baseline_mean - cmp.candidate_mean;
        const bool over = drop > *rule.max_drop;
        outcomes.push_back({rule, "max_drop", drop, *rule.max_drop, cmp.p_value, !(over && significant)});
      }
      if (rule.max_increase) {
        const double increase = cmp.candidate_mean - cmp.baseline_mean;
        const bool over = increase > *rule.max_increase;
        outcomes.push_back({rule, "max_increase", increase, *rule.max_increase, cmp.p_value, !(over && significant)});
      }
    }
  }
  return outcomes;
}

nlohmann::json
to_json(const RuleOutcome& o) {
  return {{"suite", o.rule.suite},
          {"metric", o.rule.metric},
          {"rule", o.kind},
          {"observed", o.observed},
          {"bound", o.bound},
          {"alpha", o.rule.alpha},
          {"p_value", o.p_value ? nlohmann::json(*o.p_value) : nlohmann::json(nullptr)},
          {"passed", o.passed},
          {"line", o.line()}};
}

RuleOutcome
rule_outcome_from_json(const nlohmann::json& j) {
  RuleOutcome o;
  o.rule.suite = j.at("suite").get<std::string>();
  o.rule.metric = j.at("metric").get<std::string>();
  o.rule.alpha = j.at("alpha").get<double>();
  o.kind = j.at("rule").get<std::string>();
  o.observed = j.at("observed").is_null() ? std::nan("") : j.at("observed").get<double>();
  o.bound = j.at("bound").get<double>();
  if (!j.at("p_value").is_null())
    o.p_value = j.at("p_value").get<double>();
  o.passed = j.at("passed").get<bool>();
  return o;
}

} // namespace optkit::eval
