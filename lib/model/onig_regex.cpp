#include "model/onig_regex.hpp"

#include "core/error.hpp"
#include "model/unicode.hpp"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <functional>
#include <mutex>
#include <oniguruma.h>
#include <optional>

namespace optkit::model {

namespace {

// Backtracking steps one search may take before it is abandoned. The tokenizer patterns real
// models ship need a few per byte; a catastrophic pattern needs billions.
constexpr unsigned long kRetryLimitPerSearch = 50'000'000;

void
initialize_oniguruma() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

std::string
error_text(int code, OnigErrorInfo* info) {
  OnigUChar text[ONIG_MAX_ERROR_MESSAGE_LEN];
  const int length = info ? onig_error_code_to_str(text, code, info) : onig_error_code_to_str(text, code);
  return std::string(reinterpret_cast<const char*>(text), static_cast<std::size_t>(std::max(length, 0)));
}

} // namespace

OnigRegex::OnigRegex(std::string_view pattern, const std::string& what, RegexSyntax syntax, bool ignore_case)
    : m_what(what) {
  initialize_oniguruma();
  regex_t* regex = nullptr;
  OnigErrorInfo info{};
  const auto* begin = reinterpret_cast<const OnigUChar*>(pattern.data());
  const int rc =
      onig_new(&regex, begin, begin + pattern.size(), ignore_case ? ONIG_OPTION_IGNORECASE : ONIG_OPTION_NONE,
               ONIG_ENCODING_UTF8, syntax == RegexSyntax::python ? ONIG_SYNTAX_PYTHON : ONIG_SYNTAX_DEFAULT, &info);
  if (rc != ONIG_NORMAL)
    throw InputError(fmt::format("{}: regex '{}' does not compile: {}", what, pattern, error_text(rc, &info)));
  m_regex = regex;
}

OnigRegex::~OnigRegex() {
  if (m_regex)
    onig_free(static_cast<regex_t*>(m_regex));
}

void
OnigRegex::for_each_match(std::string_view text, const std::function<bool(const void*)>& on_match) const {
  auto* regex = static_cast<regex_t*>(m_regex);
  OnigRegion* region = onig_region_new();
  OnigMatchParam* param = onig_new_match_param();
  onig_initialize_match_param(param);
  onig_set_retry_limit_in_search_of_match_param(param, kRetryLimitPerSearch);
  const auto* begin = reinterpret_cast<const OnigUChar*>(text.data());
  const auto* end = begin + text.size();
  std::size_t from = 0;
  std::optional<std::size_t> last_match_end;
  int rc = 0;
  while (from <= text.size()) {
    rc = onig_search_with_param(regex, begin, end, begin + from, end, region, ONIG_OPTION_NONE, param);
    if (rc < 0)
      break;
    const auto start = static_cast<std::size_t>(region->beg[0]);
    const auto stop = static_cast<std::size_t>(region->end[0]);
    if (start == stop && last_match_end == stop) {
      // An empty match where the last match ended: step over one character and search again.
      from += from < text.size() ? utf8_sequence_length(static_cast<unsigned char>(text[from])) : 1;
      continue;
    }
    if (!on_match(region))
      break;
    last_match_end = stop;
    from = stop;
  }
  onig_free_match_param(param);
  onig_region_free(region, 1);
  if (rc < 0 && rc != ONIG_MISMATCH)
    throw InputError(fmt::format("{}: matching the regex failed: {}", m_what, error_text(rc, nullptr)));
}

std::vector<std::pair<std::size_t, std::size_t>>
OnigRegex::find_all(std::string_view text) const {
  std::vector<std::pair<std::size_t, std::size_t>> matches;
  for_each_match(text, [&](const void* r) {
    const auto* region = static_cast<const OnigRegion*>(r);
    matches.emplace_back(static_cast<std::size_t>(region->beg[0]), static_cast<std::size_t>(region->end[0]));
    return true;
  });
  return matches;
}

std::vector<std::vector<std::string>>
OnigRegex::find_all_groups(std::string_view text) const {
  std::vector<std::vector<std::string>> matches;
  for_each_match(text, [&](const void* r) {
    const auto* region = static_cast<const OnigRegion*>(r);
    std::vector<std::string> groups;
    const int first = region->num_regs > 1 ? 1 : 0;
    for (int g = first; g < region->num_regs; ++g) {
      if (region->beg[g] < 0)
        groups.emplace_back();
      else
        groups.emplace_back(text.substr(static_cast<std::size_t>(region->beg[g]),
                                        static_cast<std::size_t>(region->end[g] - region->beg[g])));
    }
    matches.push_back(std::move(groups));
    return true;
  });
  return matches;
}

bool
OnigRegex::search(std::string_view text) const {
  bool found = false;
  for_each_match(text, [&](const void*) {
    found = true;
    return false;
  });
  return found;
}

std::string
OnigRegex::replace_all(std::string_view text, std::string_view replacement) const {
  std::string out;
  std::size_t last = 0;
  for (const auto& [start, end] : find_all(text)) {
    out.append(text.substr(last, start - last));
    out.append(replacement);
    last = end;
  }
  out.append(text.substr(last));
  return out;
}

std::string
OnigRegex::escape(std::string_view literal) {
  std::string out;
  for (const char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u) && c != '_' && u >= 0x20)
      out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

} // namespace optkit::model
