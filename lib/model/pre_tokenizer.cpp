#include "model/pre_tokenizer.hpp"

#include "core/error.hpp"
#include "model/byte_level.hpp"
#include "model/tokenizer_json.hpp"
#include "model/unicode.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace optkit::model {

namespace {

using nlohmann::json;

// Hugging Face's Whitespace pre-tokenizer: the inverse of this pattern is removed.
constexpr std::string_view kWordsAndSymbols = R"(\w+|[^\w\s]+)";

SplitBehavior
parse_behavior(const json& node, const std::string& what, SplitBehavior fallback) {
  if (!node.contains("behavior"))
    return fallback;
  const auto name = node["behavior"].is_string() ? node["behavior"].get<std::string>() : "";
  if (name == "Removed")
    return SplitBehavior::removed;
  if (name == "Isolated")
    return SplitBehavior::isolated;
  if (name == "MergedWithPrevious")
    return SplitBehavior::merged_with_previous;
  if (name == "MergedWithNext")
    return SplitBehavior::merged_with_next;
  if (name == "Contiguous")
    return SplitBehavior::contiguous;
  throw InputError(what + ": behavior '" + name +
                   "' is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
}

// Hugging Face's find_matches for a regex: matches and the gaps between them, covering the text.
std::vector<MatchedPiece>
regex_pieces(const OnigRegex& regex, std::string_view text) {
  if (text.empty())
    return {{0, 0, false}};
  std::vector<MatchedPiece> pieces;
  std::size_t previous = 0;
  for (const auto& [start, end] : regex.find_all(text)) {
    if (previous != start)
      pieces.push_back({previous, start, false});
    pieces.push_back({start, end, true});
    previous = end;
  }
  if (previous != text.size())
    pieces.push_back({previous, text.size(), false});
  return pieces;
}

// The same for a pattern every character of whose matches the scanner returns (the GPT-2, Llama-3
// and Qwen2 patterns match all text: every piece is a match).
std::vector<MatchedPiece>
scanner_pieces(SplitPattern pattern, std::string_view text) {
  if (text.empty())
    return {{0, 0, false}};
  const auto wide = decode_utf8(text);
  std::vector<MatchedPiece> pieces;
  std::size_t at = 0;
  for (const auto piece : split_text(pattern, wide)) {
    std::size_t bytes = 0;
    for (const char32_t c : piece)
      bytes += utf8_length(c);
    pieces.push_back({at, at + bytes, true});
    at += bytes;
  }
  return pieces;
}

// Hugging Face's find_matches for a character predicate: each matching character is one match.
template <class Predicate>
std::vector<MatchedPiece>
char_pieces(std::string_view text, Predicate matches) {
  if (text.empty())
    return {{0, 0, false}};
  std::vector<MatchedPiece> pieces;
  const auto wide = decode_utf8(text);
  std::size_t at = 0, gap_start = 0;
  for (const char32_t c : wide) {
    const std::size_t length = utf8_length(c);
    if (matches(c)) {
      if (gap_start < at)
        pieces.push_back({gap_start, at, false});
      pieces.push_back({at, at + length, true});
      gap_start = at + length;
    }
    at += length;
  }
  if (gap_start < at)
    pieces.push_back({gap_start, at, false});
  return pieces;
}

std::vector<MatchedPiece>
literal_pieces(std::string_view text, std::string_view literal) {
  if (text.empty())
    return {{0, 0, false}};
  std::vector<MatchedPiece> pieces;
  std::size_t previous = 0;
  for (std::size_t at = text.find(literal); at != std::string_view::npos;
       at = text.find(literal, at + literal.size())) {
    if (previous != at)
      pieces.push_back({previous, at, false});
    pieces.push_back({at, at + literal.size(), true});
    previous = at + literal.size();
  }
  if (previous != text.size())
    pieces.push_back({previous, text.size(), false});
  return pieces;
}

bool
rust_ascii_punctuation(char32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}

// The byte-level characters of `bytes`, written into `out` (a buffer reused piece to piece).
std::string_view
byte_level_chars(std::string_view bytes, std::string& out) {
  out.clear();
  for (const char byte : bytes)
    append_utf8(out, byte_to_char(static_cast<std::uint8_t>(byte)));
  return out;
}

// One reusable buffer per step and thread: pieces of one step are rewritten one at a time.
std::string&
step_buffer(std::size_t index) {
  thread_local std::vector<std::string> buffers;
  if (buffers.size() <= index)
    buffers.resize(index + 1);
  return buffers[index];
}

} // namespace

std::vector<std::pair<std::size_t, std::size_t>>
apply_split_behavior(const std::vector<MatchedPiece>& pieces, SplitBehavior behavior) {
  struct Range {
    std::size_t start, end;
    bool remove;
  };
  std::vector<Range> ranges;
  bool previous_match = false;
  switch (behavior) {
  case SplitBehavior::isolated:
    for (const auto& p : pieces)
      ranges.push_back({p.start, p.end, false});
    break;
  case SplitBehavior::removed:
    for (const auto& p : pieces)
      ranges.push_back({p.start, p.end, p.is_match});
    break;
  case SplitBehavior::contiguous:
    for (const auto& p : pieces) {
      if (p.is_match == previous_match && !ranges.empty())
        ranges.back().end = p.end;
      else
        ranges.push_back({p.start, p.end, false});
      previous_match = p.is_match;
    }
    break;
  case SplitBehavior::merged_with_previous:
    for (const auto& p : pieces) {
      if (p.is_match && !previous_match && !ranges.empty())
        ranges.back().end = p.end;
      else
        ranges.push_back({p.start, p.end, false});
      previous_match = p.is_match;
    }
    break;
  case SplitBehavior::merged_with_next:
    for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
      if (it->is_match && !previous_match && !ranges.empty())
        ranges.back().start = it->start;
      else
        ranges.push_back({it->start, it->end, false});
      previous_match = it->is_match;
    }
    std::reverse(ranges.begin(), ranges.end());
    break;
  }
  std::vector<std::pair<std::size_t, std::size_t>> kept;
  for (const auto& r : ranges)
    if (!r.remove && r.end > r.start)
      kept.emplace_back(r.start, r.end);
  return kept;
}

PreTokenizer
PreTokenizer::from_json(const nlohmann::json& node, const std::string& source) {
  PreTokenizer pre;
  const auto regex_step = [&](std::string name, std::string_view pattern, SplitBehavior behavior, bool invert,
                              const std::string& what) {
    Step step{Kind::regex, std::move(name)};
    step.fast = recognise_split_pattern(pattern);
    if (!step.fast)
      step.regex = std::make_shared<OnigRegex>(pattern, what);
    step.behavior = behavior;
    step.invert = invert;
    return step;
  };
  const auto char_step = [](std::string name, CharClass chars, SplitBehavior behavior) {
    Step step{Kind::chars, std::move(name)};
    step.chars = chars;
    step.behavior = behavior;
    return step;
  };
  for (const json& p : tokenizer_json::steps(node, "pretokenizers")) {
    const auto type = tokenizer_json::type_of(p);
    const auto what = source + ": pre_tokenizer " + type;
    if (type == "Split") {
      bool is_regex = false;
      const auto pattern = tokenizer_json::pattern_text(p.value("pattern", json()), what, is_regex);
      const auto behavior = parse_behavior(p, what, SplitBehavior::isolated);
      const bool invert = p.value("invert", false);
      if (is_regex || pattern.empty()) {
        pre.m_steps.push_back(
            regex_step(type, is_regex ? pattern : OnigRegex::escape(pattern), behavior, invert, what + " pattern"));
      } else {
        Step step{Kind::regex, type};
        step.literal = pattern;
        step.behavior = behavior;
        step.invert = invert;
        pre.m_steps.push_back(std::move(step));
      }
    } else if (type == "ByteLevel") {
      Step step{Kind::byte_level, type};
      step.add_prefix_space = p.value("add_prefix_space", true);
      if (p.value("use_regex", true)) {
        step.fast = SplitPattern::gpt2;
      }
      pre.m_steps.push_back(std::move(step));
      pre.m_byte_level = true;
    } else if (type == "Whitespace") {
      pre.m_steps.push_back(regex_step(type, kWordsAndSymbols, SplitBehavior::removed, true, what));
    } else if (type == "WhitespaceSplit") {
      pre.m_steps.push_back(char_step(type, CharClass::whitespace, SplitBehavior::removed));
    } else if (type == "BertPreTokenizer") {
      pre.m_steps.push_back(char_step(type, CharClass::whitespace, SplitBehavior::removed));
      pre.m_steps.push_back(char_step(type, CharClass::punctuation, SplitBehavior::isolated));
    } else if (type == "Digits") {
      pre.m_steps.push_back(
          char_step(type, CharClass::numeric,
                    p.value("individual_digits", false) ? SplitBehavior::isolated : SplitBehavior::contiguous));
    } else if (type == "Punctuation") {
      pre.m_steps.push_back(char_step(type, CharClass::punctuation, parse_behavior(p, what, SplitBehavior::isolated)));
    } else if (type == "Metaspace") {
      Step step{Kind::metaspace, type};
      step.replacement = p.value("replacement", std::string("\u2581"));
      if (decode_utf8(step.replacement).size() != 1)
        throw InputError(what + ": replacement must be one character");
      const std::string scheme = p.contains("prepend_scheme") && p["prepend_scheme"].is_string()
                                     ? p["prepend_scheme"].get<std::string>()
                                     : (p.value("add_prefix_space", true) ? "always" : "never");
      if (scheme != "always" && scheme != "first" && scheme != "never")
        throw InputError(what + ": prepend_scheme '" + scheme + "' is not one of always, first, never");
      step.prepend = scheme == "first"   ? Step::Prepend::first
                     : scheme == "never" ? Step::Prepend::never
                                         : Step::Prepend::always;
      step.metaspace_split = p.value("split", true);
      pre.m_steps.push_back(std::move(step));
    } else {
      throw InputError(source + ": pre_tokenizer '" + type +
                       "' is not supported (supported: Sequence, Split, ByteLevel, Whitespace, WhitespaceSplit, "
                       "BertPreTokenizer, Digits, Punctuation, Metaspace)");
    }
  }
  return pre;
}

std::vector<std::string>
PreTokenizer::component_names() const {
  std::vector<std::string> names;
  for (const auto& step : m_steps) {
    auto name = step.name;
    if (step.kind == Kind::regex && step.fast)
      name += fmt::format("({} pattern)", split_pattern_name(*step.fast));
    else if (step.kind == Kind::regex && step.regex)
      name += "(regex)";
    if (names.empty() || names.back() != name)
      names.push_back(name);
  }
  return names;
}

void
PreTokenizer::run_from(std::size_t index, std::string_view piece, bool at_start, const WordSink& word) const {
  if (index == m_steps.size()) {
    if (!piece.empty())
      word(piece);
    return;
  }
  const Step& step = m_steps[index];
  const auto split_by = [&](const std::vector<MatchedPiece>& matched, SplitBehavior behavior) {
    for (const auto& [start, end] : apply_split_behavior(matched, behavior))
      run_from(index + 1, piece.substr(start, end - start), at_start && start == 0, word);
  };
  switch (step.kind) {
  case Kind::regex: {
    if (step.fast && step.behavior == SplitBehavior::isolated && !step.invert) {
      // The common case (every byte-level tokenizer's split): scanner pieces straight to the next
      // step, with no intermediate list of ranges.
      const auto wide = decode_utf8(piece);
      std::size_t at = 0;
      for (const auto part : split_text(*step.fast, wide)) {
        std::size_t bytes = 0;
        for (const char32_t c : part)
          bytes += utf8_length(c);
        run_from(index + 1, piece.substr(at, bytes), at_start && at == 0, word);
        at += bytes;
      }
      return;
    }
    auto matched = step.fast    ? scanner_pieces(*step.fast, piece)
                   : step.regex ? regex_pieces(*step.regex, piece)
                                : literal_pieces(piece, step.literal);
    if (step.invert)
      for (auto& m : matched)
        m.is_match = !m.is_match;
    split_by(matched, step.behavior);
    return;
  }
  case Kind::chars:
    switch (step.chars) {
    case CharClass::whitespace:
      split_by(char_pieces(piece, [](char32_t c) { return is_whitespace(c); }), step.behavior);
      return;
    case CharClass::numeric:
      split_by(char_pieces(piece, [](char32_t c) { return is_number(c); }), step.behavior);
      return;
    case CharClass::punctuation:
      split_by(char_pieces(piece, [](char32_t c) { return rust_ascii_punctuation(c) || is_punctuation(c); }),
               step.behavior);
      return;
    }
    return;
  case Kind::byte_level: {
    std::string prefixed;
    if (step.add_prefix_space && !piece.starts_with(' ')) {
      prefixed = " " + std::string(piece);
      piece = prefixed;
    }
    auto& buffer = step_buffer(index);
    if (!step.fast) {
      if (!piece.empty())
        run_from(index + 1, byte_level_chars(piece, buffer), at_start, word);
      return;
    }
    // The GPT-2 split covers the whole text: every piece is a match, Isolated.
    const auto matched = scanner_pieces(*step.fast, piece);
    for (const auto& m : matched)
      if (m.end > m.start)
        run_from(index + 1, byte_level_chars(piece.substr(m.start, m.end - m.start), buffer), at_start && m.start == 0,
                 word);
    return;
  }
  case Kind::metaspace: {
    std::string text;
    text.reserve(piece.size() + 8);
    for (const char c : piece) {
      if (c == ' ')
        text += step.replacement;
      else
        text.push_back(c);
    }
    const bool prepend = step.prepend == Step::Prepend::always || (step.prepend == Step::Prepend::first && at_start);
    if (prepend && !std::string_view(text).starts_with(step.replacement))
      text.insert(0, step.replacement);
    if (!step.metaspace_split) {
      if (!text.empty())
        run_from(index + 1, text, at_start, word);
      return;
    }
    const std::string_view view(text);
    for (const auto& [start, end] :
         apply_split_behavior(literal_pieces(view, step.replacement), SplitBehavior::merged_with_next))
      run_from(index + 1, view.substr(start, end - start), at_start && start == 0, word);
    return;
  }
  }
}

void
PreTokenizer::split(std::string_view text, bool first_section, const WordSink& word) const {
  run_from(0, text, first_section, word);
}

void
PreTokenizer::split(std::string_view text, bool first_section, std::vector<std::string>& words) const {
  split(text, first_section, [&](std::string_view w) { words.emplace_back(w); });
}

} // namespace optkit::model
