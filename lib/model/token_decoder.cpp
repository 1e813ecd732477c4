#include "model/token_decoder.hpp"

#include "core/error.hpp"
#include "model/byte_level.hpp"
#include "model/tokenizer_json.hpp"
#include "model/unicode.hpp"

#include <nlohmann/json.hpp>

namespace optkit::model {

namespace {

using nlohmann::json;

void
replace_all(std::string& text, std::string_view from, std::string_view to) {
  if (from.empty())
    return;
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

std::optional<std::uint8_t>
byte_token(std::string_view token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>')
    return std::nullopt;
  const auto hex = [](char c) -> int {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
  };
  const int hi = hex(token[3]), lo = hex(token[4]);
  if (hi < 0 || lo < 0)
    return std::nullopt;
  return static_cast<std::uint8_t>(hi * 16 + lo);
}

} // namespace

void
clean_up_tokenization(std::string& text) {
  for (const auto& [from, to] : std::initializer_list<std::pair<std::string_view, std::string_view>>{{" .", "."},
                                                                                                     {" ?", "?"},
                                                                                                     {" !", "!"},
                                                                                                     {" ,", ","},
                                                                                                     {" ' ", "'"},
                                                                                                     {" n't", "n't"},
                                                                                                     {" 'm", "'m"},
                                                                                                     {" 's", "'s"},
                                                                                                     {" 've", "'ve"},
                                                                                                     {" 're", "'re"}})
    replace_all(text, from, to);
}

TokenDecoder
TokenDecoder::from_json(const nlohmann::json& node, const std::string& source) {
  TokenDecoder decoder;
  decoder.m_present = !node.is_null();
  for (const json& d : tokenizer_json::steps(node, "decoders")) {
    const auto type = tokenizer_json::type_of(d);
    const auto what = source + ": decoder " + type;
    Step step{Kind::fuse, type};
    if (type == "ByteLevel") {
      step.kind = Kind::byte_level;
      decoder.m_byte_level = true;
    } else if (type == "Replace") {
      step.kind = Kind::replace;
      bool is_regex = false;
      step.pattern = tokenizer_json::pattern_text(d.value("pattern", json()), what, is_regex);
      if (is_regex)
        step.regex = std::make_shared<OnigRegex>(step.pattern, what + " pattern");
      if (!d.contains("content") || !d["content"].is_string())
        throw InputError(what + ": 'content' must be a string");
      step.content = d["content"].get<std::string>();
    } else if (type == "ByteFallback") {
      step.kind = Kind::byte_fallback;
    } else if (type == "Fuse") {
      step.kind = Kind::fuse;
    } else if (type == "Strip") {
      step.kind = Kind::strip;
      step.content = d.value("content", std::string(" "));
      if (decode_utf8(step.content).size() != 1)
        throw InputError(what + ": 'content' must be one character");
      step.start = d.value("start", std::size_t{0});
      step.stop = d.value("stop", std::size_t{0});
    } else if (type == "Metaspace") {
      step.kind = Kind::metaspace;
      step.pattern = d.value("replacement", std::string("\u2581"));
      const std::string scheme = d.contains("prepend_scheme") && d["prepend_scheme"].is_string()
                                     ? d["prepend_scheme"].get<std::string>()
                                     : (d.value("add_prefix_space", true) ? "always" : "never");
      step.strip_first_space = scheme != "never";
    } else if (type == "WordPiece") {
      step.kind = Kind::wordpiece;
      step.prefix = d.value("prefix", std::string("##"));
      step.cleanup = d.value("cleanup", true);
    } else {
      throw InputError(source + ": decoder '" + type +
                       "' is not supported (supported: Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, "
                       "Metaspace, WordPiece)");
    }
    decoder.m_steps.push_back(std::move(step));
  }
  return decoder;
}

std::vector<std::string>
TokenDecoder::component_names() const {
  std::vector<std::string> names;
  for (const auto& step : m_steps)
    names.push_back(step.name);
  return names;
}

void
TokenDecoder::run_step(const Step& step, std::vector<DecodedPiece>& tokens) const {
  std::vector<DecodedPiece> out;
  switch (step.kind) {
  case Kind::byte_level: {
    // Runs of byte-level tokens become their bytes, read as UTF-8 (invalid bytes -> U+FFFD).
    std::string bytes;
    const auto flush = [&] {
      if (!bytes.empty())
        out.push_back({repair_utf8(bytes), false});
      bytes.clear();
    };
    for (auto& token : tokens) {
      const auto decoded = token.added ? std::nullopt : byte_level_bytes(token.text);
      if (decoded) {
        bytes += *decoded;
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    break;
  }
  case Kind::replace:
    for (auto& token : tokens) {
      if (!step.regex) {
        replace_all(token.text, step.pattern, step.content);
      } else {
        token.text = step.regex->replace_all(token.text, step.content);
      }
    }
    return;
  case Kind::byte_fallback: {
    // Hugging Face: a run of <0xXX> tokens becomes its bytes when they are valid UTF-8, else one
    // U+FFFD per byte.
    std::string bytes;
    std::size_t count = 0;
    const auto flush = [&] {
      if (count == 0)
        return;
      try {
        decode_utf8(bytes);
        out.push_back({bytes, false});
      } catch (const InputError&) {
        for (std::size_t i = 0; i < count; ++i)
          out.push_back({"\xEF\xBF\xBD", false});
      }
      bytes.clear();
      count = 0;
    };
    for (auto& token : tokens) {
      if (const auto b = token.added ? std::nullopt : byte_token(token.text)) {
        bytes.push_back(static_cast<char>(*b));
        ++count;
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    break;
  }
  case Kind::fuse: {
    std::string joined;
    for (const auto& token : tokens)
      joined += token.text;
    out.push_back({std::move(joined), false});
    break;
  }
  case Kind::strip:
    for (auto& token : tokens) {
      const auto chars = decode_utf8(token.text);
      const char32_t content = decode_utf8(step.content)[0];
      std::size_t begin = 0, end = chars.size();
      while (begin < step.start && begin < end && chars[begin] == content)
        ++begin;
      for (std::size_t i = 0; i < step.stop && end > begin && chars[end - 1] == content; ++i)
        --end;
      token.text = encode_utf8(std::u32string_view(chars).substr(begin, end - begin));
    }
    return;
  case Kind::metaspace:
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      auto& text = tokens[i].text;
      if (i == 0 && step.strip_first_space && text.starts_with(step.pattern))
        text.erase(0, step.pattern.size());
      replace_all(text, step.pattern, " ");
    }
    return;
  case Kind::wordpiece:
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      auto& text = tokens[i].text;
      if (i > 0) {
        if (text.starts_with(step.prefix))
          text.erase(0, step.prefix.size());
        else
          text.insert(0, 1, ' ');
      }
      if (step.cleanup)
        clean_up_tokenization(text);
    }
    return;
  }
  tokens.swap(out);
}

std::string
TokenDecoder::decode(std::vector<DecodedPiece> tokens) const {
  std::string text;
  if (!m_present) {
    for (std::size_t i = 0; i < tokens.size(); ++i)
      text += (i ? " " : "") + tokens[i].text;
    return text;
  }
  for (const auto& step : m_steps)
    run_step(step, tokens);
  for (const auto& token : tokens)
    text += token.text;
  return text;
}

} // namespace optkit::model
