#include "eval/answer_filters.hpp"

#include "core/text.hpp"

#include <algorithm>
#include <cctype>

namespace optkit::eval {

AnswerFilter::AnswerFilter(const FilterPipeline& pipeline) : m_name(pipeline.name) {
  for (const auto& spec : pipeline.steps) {
    Step step{spec, nullptr};
    if (spec.function == "regex")
      step.regex =
          std::make_shared<const model::OnigRegex>(spec.pattern, "filter " + pipeline.name, model::RegexSyntax::python);
    m_steps.push_back(std::move(step));
  }
}

std::string
AnswerFilter::apply(const std::string& response) const {
  std::string out = response;
  for (const auto& step : m_steps) {
    const auto& f = step.spec.function;
    if (f == "regex") {
      // lm-eval RegexFilter: findall; pick match[group_select]; a tuple match gives its first
      // non-empty group; no match (or an all-empty tuple) gives the fallback; the pick is stripped.
      const auto matches = step.regex->find_all_groups(out);
      if (matches.empty()) {
        out = step.spec.fallback;
        continue;
      }
      const auto n = static_cast<long>(matches.size());
      long pick = step.spec.group_select;
      if (pick < 0)
        pick += n;
      if (pick < 0 || pick >= n) {
        out = step.spec.fallback;
        continue;
      }
      const auto& groups = matches[static_cast<std::size_t>(pick)];
      std::string chosen;
      bool found = groups.size() == 1;
      if (found)
        chosen = groups[0];
      else
        for (const auto& g : groups)
          if (!g.empty()) {
            chosen = g;
            found = true;
            break;
          }
      out = found ? std::string(strip_chars(chosen)) : step.spec.fallback;
    } else if (f == "lowercase") {
      out = ascii_case(out, false);
    } else if (f == "uppercase") {
      out = ascii_case(out, true);
    } else if (f == "remove_whitespace") {
      const auto first = out.find_first_not_of(' ');
      out = first == std::string::npos ? std::string() : out.substr(first);
    } else if (f == "strip") {
      out = std::string(strip_chars(out));
    }
    // take_first: one response per item, so it keeps what it has.
  }
  return out;
}

ExactMatch::ExactMatch(const ExactMatchOptions& options) : m_options(options) {
  for (const auto& pattern : options.regexes_to_ignore)
    m_ignore.push_back(
        std::make_shared<const model::OnigRegex>(pattern, "regexes_to_ignore", model::RegexSyntax::python));
}

std::string
ExactMatch::normalize(std::string text) const {
  for (const auto& regex : m_ignore)
    text = regex->replace_all(text, "");
  if (m_options.ignore_case)
    text = ascii_case(text, false);
  if (m_options.ignore_punctuation)
    text.erase(
        std::remove_if(text.begin(), text.end(), [](char c) { return std::ispunct(static_cast<unsigned char>(c)); }),
        text.end());
  if (m_options.ignore_numbers)
    text.erase(
        std::remove_if(text.begin(), text.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }),
        text.end());
  return text;
}

bool
ExactMatch::matches(const std::string& prediction, const std::string& reference) const {
  return normalize(prediction) == normalize(reference);
}

} // namespace optkit::eval
