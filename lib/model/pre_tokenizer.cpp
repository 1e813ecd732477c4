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
      bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
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
    const std::size_t length = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
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

std::string
byte_level_chars(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char byte : bytes)
    append_utf8(out, byte_to_char(static_cast<std::uint8_t>(byte)));
  return out;
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
        step.replacement = pattern; // a literal: matched by plain search
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
PreTokenizer::run_step(const Step& step, std::vector<Piece>& pieces) const {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  const auto keep = [&](const Piece& piece, const std::vector<MatchedPiece>& matched, SplitBehavior behavior) {
    for (const auto& [start, end] : apply_split_behavior(matched, behavior))
      out.push_back({piece.text.substr(start, end - start), piece.at_start && start == 0});
  };
  for (auto& piece : pieces) {
    switch (step.kind) {
    case Kind::regex: {
      auto matched = step.fast    ? scanner_pieces(*step.fast, piece.text)
                     : step.regex ? regex_pieces(*step.regex, piece.text)
                                  : literal_pieces(piece.text, step.replacement);
      if (step.invert)
        for (auto& m : matched)
          m.is_match = !m.is_match;
      keep(piece, matched, step.behavior);
      break;
    }
    case Kind::chars:
      switch (step.chars) {
      case CharClass::whitespace:
        keep(piece, char_pieces(piece.text, [](char32_t c) { return is_whitespace(c); }), step.behavior);
        break;
      case CharClass::numeric:
        keep(piece, char_pieces(piece.text, [](char32_t c) { return is_number(c); }), step.behavior);
        break;
      case CharClass::punctuation:
        keep(piece, char_pieces(piece.text, [](char32_t c) { return rust_ascii_punctuation(c) || is_punctuation(c); }),
             step.behavior);
        break;
      }
      break;
    case Kind::byte_level: {
      if (step.add_prefix_space && !piece.text.starts_with(' '))
        piece.text.insert(0, 1, ' ');
      if (step.fast) {
        for (const auto& [start, end] :
             apply_split_behavior(scanner_pieces(*step.fast, piece.text), SplitBehavior::isolated))
          out.push_back({byte_level_chars(std::string_view(piece.text).substr(start, end - start)),
                         piece.at_start && start == 0});
      } else if (!piece.text.empty()) {
        out.push_back({byte_level_chars(piece.text), piece.at_start});
      }
      break;
    }
    case Kind::metaspace: {
      std::string text;
      text.reserve(piece.text.size() + 8);
      for (const char c : piece.text) {
        if (c == ' ')
          text += step.replacement;
        else
          text.push_back(c);
      }
      const bool prepend =
          step.prepend == Step::Prepend::always || (step.prepend == Step::Prepend::first && piece.at_start);
      if (prepend && !text.starts_with(step.replacement))
        text.insert(0, step.replacement);
      Piece replaced{std::move(text), piece.at_start};
      if (step.metaspace_split)
        keep(replaced, literal_pieces(replaced.text, step.replacement), SplitBehavior::merged_with_next);
      else if (!replaced.text.empty())
        out.push_back(std::move(replaced));
      break;
    }
    }
  }
  pieces.swap(out);
}

void
PreTokenizer::split(std::string_view text, bool first_section, std::vector<std::string>& words) const {
  std::vector<Piece> pieces{{std::string(text), first_section}};
  for (const auto& step : m_steps)
    run_step(step, pieces);
  for (auto& piece : pieces)
    if (!piece.text.empty())
      words.push_back(std::move(piece.text));
}

} // namespace optkit::model
