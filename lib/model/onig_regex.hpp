// A regular expression compiled by Oniguruma, the engine Hugging Face tokenizers compile
// tokenizer.json patterns with (onig crate, default syntax, UTF-8), so a pattern means here what it
// means there. Matching is bounded: a pattern that backtracks catastrophically on some text fails
// with InputError instead of running for hours.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace optkit::model {

// How a pattern is read: Oniguruma's own syntax (what tokenizer.json patterns use), or Python's
// `re` syntax (what lm-eval's filters and IFEval's checkers are written in: `(?s)`, `(?P<name>)`).
enum class RegexSyntax { oniguruma, python };

class OnigRegex {
public:
  // Throws InputError naming `what` (e.g. "tokenizer.json: pre_tokenizer Split pattern") and
  // Oniguruma's message when the pattern does not compile.
  OnigRegex(std::string_view pattern, const std::string& what, RegexSyntax syntax = RegexSyntax::oniguruma,
            bool ignore_case = false);
  ~OnigRegex();
  OnigRegex(const OnigRegex&) = delete;
  OnigRegex& operator=(const OnigRegex&) = delete;

  // The [start, end) byte ranges of the successive non-overlapping matches in `text` (valid
  // UTF-8), as the onig crate's find_iter yields them: an empty match right where the previous
  // match ended is skipped by advancing one character.
  std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view text) const;

  // Python's re.findall: per match, its capture groups' texts in order ("" for a group that took
  // no part), or the whole match when the pattern has no groups.
  std::vector<std::vector<std::string>> find_all_groups(std::string_view text) const;

  // Whether the pattern matches anywhere in `text` (re.search).
  bool search(std::string_view text) const;

  // `text` with every match (as find_all finds them) replaced by `replacement`.
  std::string replace_all(std::string_view text, std::string_view replacement) const;

  // The pattern that matches `literal` exactly (every ASCII punctuation character escaped).
  static std::string escape(std::string_view literal);

private:
  // Calls on_match with each successive match's OnigRegion until it returns false.
  void for_each_match(std::string_view text, const std::function<bool(const void*)>& on_match) const;

  void* m_regex = nullptr; // OnigRegex (regex_t*); kept opaque so the header needs no oniguruma.h
  std::string m_what;
};

} // namespace optkit::model
