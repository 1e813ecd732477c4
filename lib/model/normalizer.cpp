#include "model/normalizer.hpp"

#include "core/error.hpp"
#include "model/tokenizer_json.hpp"
#include "model/unicode.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace optkit::model {

namespace {

using nlohmann::json;

// BertNormalizer's notion of whitespace and control (Hugging Face normalizers/bert.rs).
bool
bert_whitespace(char32_t c) {
  return c == U'\t' || c == U'\n' || c == U'\r' || is_whitespace(c);
}

bool
bert_control(char32_t c) {
  return c != U'\t' && c != U'\n' && c != U'\r' && is_other(c);
}

bool
chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

void
replace_literal(std::u32string& text, const std::u32string& from, const std::u32string& to) {
  if (from.empty() || text.find(from) == std::u32string::npos)
    return;
  std::u32string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    if (text.compare(i, from.size(), from) == 0) {
      out += to;
      i += from.size();
    } else {
      out.push_back(text[i++]);
    }
  }
  text.swap(out);
}

// StripAccents removes every combining mark (unicode-normalization's is_combining_mark: M*);
// BertNormalizer's accent stripping only the non-spacing ones (Mn).
void
remove_marks(std::u32string& text, bool nonspacing_only) {
  std::erase_if(text, [&](char32_t c) { return nonspacing_only ? is_nonspacing_mark(c) : is_mark(c); });
}

void
lowercase(std::u32string& text) {
  std::u32string out;
  out.reserve(text.size());
  for (const char32_t c : text)
    append_lowercase(c, out);
  text.swap(out);
}

std::u32string
u32_member(const json& node, const char* key, const std::string& what) {
  if (!node.contains(key) || !node[key].is_string())
    throw InputError(what + ": '" + key + "' must be a string");
  return decode_utf8(node[key].get<std::string>());
}

} // namespace

Normalizer
Normalizer::from_json(const nlohmann::json& node, const std::string& source) {
  Normalizer normalizer;
  for (const json& n : tokenizer_json::steps(node, "normalizers")) {
    const auto type = tokenizer_json::type_of(n);
    const auto what = source + ": normalizer " + type;
    Step step{Kind::nfc, type, {}, {}, nullptr};
    if (type == "NFC") {
      step.kind = Kind::nfc;
    } else if (type == "NFD") {
      step.kind = Kind::nfd;
    } else if (type == "NFKC") {
      step.kind = Kind::nfkc;
    } else if (type == "NFKD") {
      step.kind = Kind::nfkd;
    } else if (type == "Lowercase") {
      step.kind = Kind::lowercase;
    } else if (type == "StripAccents") {
      step.kind = Kind::strip_accents;
    } else if (type == "Strip") {
      step.kind = Kind::strip;
      step.left = n.value("strip_left", true);
      step.right = n.value("strip_right", true);
    } else if (type == "Prepend") {
      step.kind = Kind::prepend;
      step.text = u32_member(n, "prepend", what);
    } else if (type == "Replace") {
      step.kind = Kind::replace;
      bool is_regex = false;
      const auto pattern = tokenizer_json::pattern_text(n.value("pattern", json()), what, is_regex);
      if (is_regex)
        step.regex = std::make_shared<OnigRegex>(pattern, what + " pattern");
      else
        step.text = decode_utf8(pattern);
      step.content = u32_member(n, "content", what);
    } else if (type == "BertNormalizer") {
      step.kind = Kind::bert;
      step.clean_text = n.value("clean_text", true);
      step.chinese_chars = n.value("handle_chinese_chars", true);
      step.lowercase = n.value("lowercase", true);
      const auto& accents = n.contains("strip_accents") ? n["strip_accents"] : json();
      step.strip_accents = accents.is_boolean() ? accents.get<bool>() : step.lowercase;
    } else {
      throw InputError(source + ": normalizer '" + type +
                       "' is not supported (supported: Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Strip, "
                       "StripAccents, Prepend, Replace, BertNormalizer)");
    }
    normalizer.m_steps.push_back(std::move(step));
  }
  return normalizer;
}

std::vector<std::string>
Normalizer::component_names() const {
  std::vector<std::string> names;
  for (const auto& step : m_steps)
    names.push_back(step.name);
  return names;
}

void
Normalizer::apply_step(const Step& step, std::u32string& text) const {
  switch (step.kind) {
  case Kind::nfc:
    text = to_nfc(text);
    break;
  case Kind::nfd:
    text = to_nfd(text);
    break;
  case Kind::nfkc:
    text = to_nfkc(text);
    break;
  case Kind::nfkd:
    text = to_nfkd(text);
    break;
  case Kind::lowercase:
    lowercase(text);
    break;
  case Kind::strip_accents:
    remove_marks(text, false);
    break;
  case Kind::strip: {
    std::size_t begin = 0, end = text.size();
    if (step.left)
      while (begin < end && is_whitespace(text[begin]))
        ++begin;
    if (step.right)
      while (end > begin && is_whitespace(text[end - 1]))
        --end;
    text = text.substr(begin, end - begin);
    break;
  }
  case Kind::prepend:
    if (!text.empty())
      text.insert(0, step.text);
    break;
  case Kind::replace:
    if (!step.regex) {
      replace_literal(text, step.text, step.content);
    } else {
      text = decode_utf8(step.regex->replace_all(encode_utf8(text), encode_utf8(step.content)));
    }
    break;
  case Kind::bert: {
    std::u32string out;
    out.reserve(text.size());
    for (const char32_t c : text) {
      if (step.clean_text && (c == 0 || c == 0xFFFD || bert_control(c)))
        continue;
      const char32_t mapped = step.clean_text && bert_whitespace(c) ? U' ' : c;
      if (step.chinese_chars && chinese_char(mapped)) {
        out.push_back(U' ');
        out.push_back(mapped);
        out.push_back(U' ');
      } else {
        out.push_back(mapped);
      }
    }
    if (step.strip_accents) {
      out = to_nfd(out);
      remove_marks(out, true);
    }
    if (step.lowercase)
      lowercase(out);
    text.swap(out);
    break;
  }
  }
}

std::string
Normalizer::apply(std::string_view text) const {
  if (m_steps.empty())
    return std::string(text);
  auto s = decode_utf8(text);
  for (const auto& step : m_steps)
    apply_step(step, s);
  return encode_utf8(s);
}

} // namespace optkit::model
