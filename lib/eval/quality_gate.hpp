// The quality gate a pipeline (or a Makefile) chains on: rules per suite and metric — a minimum
// recovery, a maximum drop, a minimum score — where a shortfall against the baseline fails only
// when it is significant (p < alpha, paired test on the same items). Every rule's outcome is
// reported with the observed value, the bound and the p-value.
#pragma once

#include "eval/paired_statistics.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace optkit::eval {

struct GateRule {
  std::string suite, metric;
  std::optional<double> min_recovery; // candidate ÷ baseline
  std::optional<double> max_drop;     // baseline − candidate, in the metric's units
  std::optional<double> max_increase; // candidate − baseline, for lower-is-better metrics (nll, kl)
  std::optional<double> min_score;    // absolute, no baseline needed, no significance test
  std::optional<double> max_score;    // absolute upper bound (kl, perplexity), no test
  double alpha = 0.05;                // a shortfall must have p < alpha to fail (1: any shortfall fails)
  int line = 0;                       // in the gate file, for messages
};

struct QualityGate {
  std::filesystem::path file;
  std::vector<GateRule> rules;
  bool holm = false; // `correction: holm`: p-values adjusted across the gate's baseline comparisons
};

// InputError (file:line:col) for a schema violation or a rule with no bound.
QualityGate load_quality_gate(const std::filesystem::path& file);

// What the gate reads for one suite's metric.
struct GateObservation {
  std::string suite, metric;
  double score = 0;
  std::optional<PairedComparison> versus_baseline;
};

struct RuleOutcome {
  GateRule rule;
  std::string kind; // "min_recovery" | "max_drop" | "max_increase" | "min_score" | "max_score"
  double observed = 0, bound = 0;
  std::optional<double> p_value;
  bool passed = true;
  std::string line() const; // "FAIL gsm8k exact_match,strict-match: recovery 0.61 < 0.98 (p = 2.1e-09)"
};

// One outcome per (rule, bound). InputError when a rule names a suite or metric that was not
// evaluated (listing those that were), or needs a baseline that was not given.
std::vector<RuleOutcome> apply_quality_gate(const QualityGate& gate, const std::vector<GateObservation>& observations);

nlohmann::json to_json(const RuleOutcome& outcome);
// The inverse of to_json (an observed value written as null reads as NaN); nlohmann's exception
// naming the field when `j` is not one.
RuleOutcome rule_outcome_from_json(const nlohmann::json& j);

} // namespace optkit::eval
