#include "model/pre_tokenizer_split.hpp"

#include "model/unicode.hpp"

namespace optkit::model {

namespace {

constexpr std::string_view kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool
is_newline(char32_t c) {
  return c == '\r' || c == '\n';
}

bool
is_symbol_or_punctuation(char32_t c) { // [^\s\p{L}\p{N}]
  return !is_whitespace(c) && !is_letter(c) && !is_number(c);
}

// Case folding as Oniguruma's (?i:...) applies it to the contraction letters: ASCII, and the long
// s (U+017F), which folds to 's'.
char32_t
fold_case(char32_t c) {
  return c >= 'A' && c <= 'Z' ? c + 32 : c == 0x17F ? U's' : c;
}

// Length of a contraction at `i` ('s 't 're 've 'm 'll 'd), 0 if none.
std::size_t
contraction(std::u32string_view t, std::size_t i, bool ignore_case) {
  if (t[i] != '\'' || i + 1 >= t.size())
    return 0;
  const auto at = [&](std::size_t k) { return ignore_case ? fold_case(t[k]) : t[k]; };
  const char32_t a = at(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd')
    return 2;
  if (i + 2 < t.size()) {
    const char32_t b = at(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
      return 3;
  }
  return 0;
}

template <typename Pred>
std::size_t
run(std::u32string_view t, std::size_t i, Pred pred) {
  while (i < t.size() && pred(t[i]))
    ++i;
  return i;
}

// The whitespace alternatives shared by all patterns: \s+(?!\S) then \s+. `i` is whitespace.
std::size_t
whitespace_end(std::u32string_view t, std::size_t i) {
  const std::size_t end = run(t, i, is_whitespace);
  if (end == t.size() || end - i == 1)
    return end;
  return end - 1; // leave the last space to prefix the next word
}

std::size_t
match_gpt2(std::u32string_view t, std::size_t i) {
  if (const auto n = contraction(t, i, false))
    return i + n;
  const std::size_t j = (t[i] == ' ' && i + 1 < t.size()) ? i + 1 : i;
  if (is_letter(t[j]))
    return run(t, j, is_letter);
  if (is_number(t[j]))
    return run(t, j, is_number);
  if (is_symbol_or_punctuation(t[j]))
    return run(t, j, is_symbol_or_punctuation);
  return whitespace_end(t, i);
}

std::size_t
match_llama3(std::u32string_view t, std::size_t i, std::size_t max_digits) {
  if (const auto n = contraction(t, i, true))
    return i + n;
  const char32_t c = t[i];
  if (is_letter(c))
    return run(t, i, is_letter);
  if (!is_newline(c) && !is_number(c) && i + 1 < t.size() && is_letter(t[i + 1]))
    return run(t, i + 1, is_letter);
  if (is_number(c)) {
    std::size_t j = i;
    while (j < t.size() && j - i < max_digits && is_number(t[j]))
      ++j;
    return j;
  }
  const std::size_t p = (c == ' ' && i + 1 < t.size() && is_symbol_or_punctuation(t[i + 1])) ? i + 1 : i;
  if (is_symbol_or_punctuation(t[p]))
    return run(t, run(t, p, is_symbol_or_punctuation), is_newline);
  // c is whitespace: \s*[\r\n]+ ends after the run's last newline, if it has one
  const std::size_t end = run(t, i, is_whitespace);
  for (std::size_t k = end; k > i; --k)
    if (is_newline(t[k - 1]))
      return k;
  return whitespace_end(t, i);
}

} // namespace

std::optional<SplitPattern>
recognise_split_pattern(std::string_view regex) {
  if (regex == kGpt2)
    return SplitPattern::gpt2;
  if (regex == kLlama3)
    return SplitPattern::llama3;
  if (regex == kQwen2)
    return SplitPattern::qwen2;
  return std::nullopt;
}

std::string_view
split_pattern_name(SplitPattern pattern) {
  switch (pattern) {
  case SplitPattern::gpt2:
    return "gpt2";
  case SplitPattern::llama3:
    return "llama3";
  case SplitPattern::qwen2:
    return "qwen2";
  }
  return "?";
}

std::string_view
split_pattern_regex(SplitPattern pattern) {
  switch (pattern) {
  case SplitPattern::gpt2:
    return kGpt2;
  case SplitPattern::llama3:
    return kLlama3;
  case SplitPattern::qwen2:
    return kQwen2;
  }
  return {};
}

std::vector<std::u32string_view>
split_text(SplitPattern pattern, std::u32string_view text) {
  std::vector<std::u32string_view> pieces;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t end = 0;
    switch (pattern) {
    case SplitPattern::gpt2:
      end = match_gpt2(text, i);
      break;
    case SplitPattern::llama3:
      end = match_llama3(text, i, 3);
      break;
    case SplitPattern::qwen2:
      end = match_llama3(text, i, 1);
      break;
    }
    if (end <= i)
      end = i + 1;
    pieces.push_back(text.substr(i, end - i));
    i = end;
  }
  return pieces;
}

} // namespace optkit::model
