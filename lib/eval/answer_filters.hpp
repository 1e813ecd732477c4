// lm-eval's answer extraction and exact_match scoring, byte for byte: a filter pipeline (regex
// with group_select and the "[invalid]" fallback, take_first, case and whitespace steps) turns a
// response into an answer; HF evaluate's exact_match removes regexes_to_ignore from both sides,
// folds case and punctuation as configured, and compares the strings.
#pragma once

#include "eval/task_suite.hpp"
#include "model/onig_regex.hpp"

#include <memory>
#include <string>
#include <vector>

namespace optkit::eval {

class AnswerFilter {
public:
  explicit AnswerFilter(const FilterPipeline& pipeline); // compiles the patterns once
  const std::string& name() const { return m_name; }
  std::string apply(const std::string& response) const;

private:
  struct Step {
    FilterStep spec;
    std::shared_ptr<const model::OnigRegex> regex;
  };
  std::string m_name;
  std::vector<Step> m_steps;
};

class ExactMatch {
public:
  explicit ExactMatch(const ExactMatchOptions& options);
  // The text exact_match compares after its transformations.
  std::string normalize(std::string text) const;
  bool matches(const std::string& prediction, const std::string& reference) const;

private:
  ExactMatchOptions m_options;
  std::vector<std::shared_ptr<const model::OnigRegex>> m_ignore;
};

} // namespace optkit::eval
