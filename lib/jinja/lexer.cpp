#include "jinja/lexer.hpp"

#include "core/error.hpp"

#include <cctype>
#include <fmt/format.h>

namespace optkit::jinja {

namespace {

bool
space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// One trailing newline is dropped (Jinja's keep_trailing_newline=False), unless kept.
std::string
preprocess(std::string_view source, bool keep_trailing_newline) {
  std::string text(source);
  if (!keep_trailing_newline && !text.empty() && text.back() == '\n')
    text.pop_back();
  return text;
}

} // namespace

std::vector<Token>
tokenize(std::string_view source, const std::string& name, bool keep_trailing_newline) {
  const std::string src = preprocess(source, keep_trailing_newline);
  std::vector<Token> tokens;
  std::size_t at = 0;
  int line = 1, column = 1;
  const auto advance = [&](std::size_t n) {
    for (std::size_t k = 0; k < n && at < src.size(); ++k, ++at) {
      if (src[at] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
  };
  const auto fail = [&](const std::string& what) {
    throw InputError(fmt::format("{}:{}:{}: {}", name, line, column, what));
  };
  const auto push = [&](Token::Kind kind, std::string text, int l, int c) {
    tokens.push_back({kind, std::move(text), l, c});
  };
  const auto strip_trailing_text = [&] {
    if (!tokens.empty() && tokens.back().kind == Token::Kind::text) {
      auto& t = tokens.back().text;
      while (!t.empty() && space(t.back()))
        t.pop_back();
      if (t.empty())
        tokens.pop_back();
    }
  };
  const auto skip_space = [&] {
    while (at < src.size() && space(src[at]))
      advance(1);
  };
  constexpr std::size_t npos = std::string::npos;
  std::size_t text_start = npos; // where the last text token began in the source
  bool inside = false;           // inside {{ }} or {% %}
  // trim_blocks: the newline right after a block or comment tag goes
  const auto trim_newline = [&] {
    if (at < src.size() && src[at] == '\n')
      advance(1);
  };
  Token::Kind closing = Token::Kind::close_expression;
  int brace_depth = 0;
  while (at < src.size()) {
    if (!inside) {
      const int l = line, c = column;
      text_start = npos;
      const std::size_t start = at;
      std::string text;
      while (at < src.size() && !(src[at] == '{' && at + 1 < src.size() &&
                                  (src[at + 1] == '{' || src[at + 1] == '%' || src[at + 1] == '#'))) {
        text.push_back(src[at]);
        advance(1);
      }
      if (!text.empty()) {
        push(Token::Kind::text, std::move(text), l, c);
        text_start = start;
      }
      if (at >= src.size())
        break;
      // lstrip_blocks: spaces and tabs between a line start and a block or comment tag go
      if (src[at + 1] != '{' && !tokens.empty() && tokens.back().kind == Token::Kind::text && text_start != npos) {
        auto& t = tokens.back().text;
        auto cut = t.size();
        while (cut > 0 && (t[cut - 1] == ' ' || t[cut - 1] == '\t'))
          --cut;
        const bool line_start = cut > 0 ? t[cut - 1] == '\n' : text_start == 0 || src[text_start - 1] == '\n';
        if (line_start) {
          t.resize(cut);
          if (t.empty())
            tokens.pop_back();
        }
      }
      if (src[at + 1] == '#') {
        const bool strip_before = at + 2 < src.size() && src[at + 2] == '-';
        const auto end = src.find("#}", at + 2);
        if (end == std::string::npos)
          fail("comment is not closed with #}");
        const bool strip_after = end > at + 2 && src[end - 1] == '-';
        if (strip_before)
          strip_trailing_text();
        advance(end + 2 - at);
        if (strip_after)
          skip_space();
        else
          trim_newline();
        continue;
      }
      const bool expression = src[at + 1] == '{';
      const int tl = line, tc = column;
      const bool strip = at + 2 < src.size() && src[at + 2] == '-';
      if (strip)
        strip_trailing_text();
      advance(strip ? 3 : 2);
      push(expression ? Token::Kind::open_expression : Token::Kind::open_statement, expression ? "{{" : "{%", tl, tc);
      inside = true;
      closing = expression ? Token::Kind::close_expression : Token::Kind::close_statement;
      brace_depth = 0;
      continue;
    }
    skip_space();
    if (at >= src.size())
      fail(closing == Token::Kind::close_expression ? "expression is not closed with }}" : "tag is not closed with %}");
    const int l = line, c = column;
    const std::string_view rest(src.data() + at, src.size() - at);
    const std::string_view close = closing == Token::Kind::close_expression ? "}}" : "%}";
    const bool dash_close = rest.size() >= 3 && rest[0] == '-' && rest.substr(1, 2) == close;
    if ((rest.starts_with(close) && (closing == Token::Kind::close_statement || brace_depth == 0)) || dash_close) {
      advance(dash_close ? 3 : 2);
      push(closing, std::string(close), l, c);
      inside = false;
      if (dash_close)
        skip_space();
      else if (closing == Token::Kind::close_statement)
        trim_newline();
      continue;
    }
    const char ch = src[at];
    if (ch == '\'' || ch == '"') {
      std::string value;
      advance(1);
      while (true) {
        if (at >= src.size())
          fail("string literal is not closed");
        const char d = src[at];
        if (d == ch) {
          advance(1);
          break;
        }
        if (d == '\\') {
          if (at + 1 >= src.size())
            fail("string literal ends in a backslash");
          const char e = src[at + 1];
          advance(2);
          switch (e) {
          case 'n':
            value += '\n';
            break;
          case 't':
            value += '\t';
            break;
          case 'r':
            value += '\r';
            break;
          case 'b':
            value += '\b';
            break;
          case 'f':
            value += '\f';
            break;
          case 'v':
            value += '\v';
            break;
          case '\'':
          case '"':
          case '\\':
            value += e;
            break;
          default:
            fail(fmt::format("unknown escape \\{} in a string literal", e));
          }
          continue;
        }
        value.push_back(d);
        advance(1);
      }
      push(Token::Kind::string, std::move(value), l, c);
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(ch))) {
      std::string number;
      while (at < src.size() && std::isdigit(static_cast<unsigned char>(src[at]))) {
        number.push_back(src[at]);
        advance(1);
      }
      const bool after_dot = !tokens.empty() && tokens.back().kind == Token::Kind::symbol && tokens.back().text == ".";
      if (!after_dot && at + 1 < src.size() && src[at] == '.' &&
          std::isdigit(static_cast<unsigned char>(src[at + 1]))) {
        number.push_back('.');
        advance(1);
        while (at < src.size() && std::isdigit(static_cast<unsigned char>(src[at]))) {
          number.push_back(src[at]);
          advance(1);
        }
        push(Token::Kind::floating, std::move(number), l, c);
      } else {
        push(Token::Kind::integer, std::move(number), l, c);
      }
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
      std::string word;
      while (at < src.size() && (std::isalnum(static_cast<unsigned char>(src[at])) || src[at] == '_')) {
        word.push_back(src[at]);
        advance(1);
      }
      push(Token::Kind::name, std::move(word), l, c);
      continue;
    }
    static const char* const symbols[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                          ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|", "?"};
    bool matched = false;
    for (const char* s : symbols) {
      if (rest.starts_with(s)) {
        const std::string text(s);
        if (text == "{")
          ++brace_depth;
        else if (text == "}")
          --brace_depth;
        advance(text.size());
        push(Token::Kind::symbol, text, l, c);
        matched = true;
        break;
      }
    }
    if (!matched)
      fail(fmt::format("unexpected character '{}'", ch));
  }
  if (inside)
    fail(closing == Token::Kind::close_expression ? "expression is not closed with }}" : "tag is not closed with %}");
  tokens.push_back({Token::Kind::end, "", line, column});
  return tokens;
}

} // namespace optkit::jinja
