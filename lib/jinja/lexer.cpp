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

// Jinja's lexer with chat templates' settings (trim_blocks, lstrip_blocks): text outside tags
// as text tokens, and inside {{ }} and {% %} strings, numbers, names and symbols.
class Lexer {
public:
  Lexer(std::string_view source, const std::string& name, bool keep_trailing_newline)
      : m_src(preprocess(source, keep_trailing_newline)), m_name(name) {}

  std::vector<Token> run() {
    while (m_at < m_src.size()) {
      if (m_inside)
        lex_inside_tag();
      else
        lex_outside_tags();
    }
    if (m_inside)
      fail_unclosed();
    m_tokens.push_back({Token::Kind::end, "", m_line, m_column});
    return std::move(m_tokens);
  }

private:
  static constexpr std::size_t npos = std::string::npos;

  void advance(std::size_t n) {
    for (std::size_t k = 0; k < n && m_at < m_src.size(); ++k, ++m_at) {
      if (m_src[m_at] == '\n') {
        ++m_line;
        m_column = 1;
      } else {
        ++m_column;
      }
    }
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}:{}:{}: {}", m_name, m_line, m_column, what));
  }
  [[noreturn]] void fail_unclosed() const {
    fail(m_closing == Token::Kind::close_expression ? "expression is not closed with }}" : "tag is not closed with %}");
  }
  void push(Token::Kind kind, std::string text, int line, int column) {
    m_tokens.push_back({kind, std::move(text), line, column});
  }
  char peek(std::size_t ahead = 0) const { return m_at + ahead < m_src.size() ? m_src[m_at + ahead] : '\0'; }
  void skip_space() {
    while (m_at < m_src.size() && space(m_src[m_at]))
      advance(1);
  }
  // {%- and {{-: the whitespace at the end of the text before goes.
  void strip_trailing_text() {
    if (!m_tokens.empty() && m_tokens.back().kind == Token::Kind::text) {
      auto& t = m_tokens.back().text;
      while (!t.empty() && space(t.back()))
        t.pop_back();
      if (t.empty())
        m_tokens.pop_back();
    }
  }
  // trim_blocks: the newline right after a block or comment tag goes.
  void trim_newline() {
    if (peek() == '\n')
      advance(1);
  }
  // lstrip_blocks: spaces and tabs between a line start and a block or comment tag go.
  void lstrip_before_tag() {
    if (m_tokens.empty() || m_tokens.back().kind != Token::Kind::text || m_text_start == npos)
      return;
    auto& t = m_tokens.back().text;
    auto cut = t.size();
    while (cut > 0 && (t[cut - 1] == ' ' || t[cut - 1] == '\t'))
      --cut;
    const bool line_start = cut > 0 ? t[cut - 1] == '\n' : m_text_start == 0 || m_src[m_text_start - 1] == '\n';
    if (line_start) {
      t.resize(cut);
      if (t.empty())
        m_tokens.pop_back();
    }
  }

  bool at_tag() const { return peek() == '{' && (peek(1) == '{' || peek(1) == '%' || peek(1) == '#'); }

  // Text up to the next tag, then the tag's opening (a comment is skipped whole).
  void lex_outside_tags() {
    const int line = m_line, column = m_column;
    m_text_start = npos;
    const std::size_t start = m_at;
    std::string text;
    while (m_at < m_src.size() && !at_tag()) {
      text.push_back(m_src[m_at]);
      advance(1);
    }
    if (!text.empty()) {
      push(Token::Kind::text, std::move(text), line, column);
      m_text_start = start;
    }
    if (m_at >= m_src.size())
      return;
    if (peek(1) != '{')
      lstrip_before_tag();
    if (peek(1) == '#')
      skip_comment();
    else
      open_tag();
  }

  void skip_comment() {
    const bool strip_before = peek(2) == '-';
    const auto end = m_src.find("#}", m_at + 2);
    if (end == npos)
      fail("comment is not closed with #}");
    const bool strip_after = end > m_at + 2 && m_src[end - 1] == '-';
    if (strip_before)
      strip_trailing_text();
    advance(end + 2 - m_at);
    if (strip_after)
      skip_space();
    else
      trim_newline();
  }

  void open_tag() {
    const bool expression = peek(1) == '{';
    const int line = m_line, column = m_column;
    const bool strip = peek(2) == '-';
    if (strip)
      strip_trailing_text();
    advance(strip ? 3 : 2);
    push(expression ? Token::Kind::open_expression : Token::Kind::open_statement, expression ? "{{" : "{%", line,
         column);
    m_inside = true;
    m_closing = expression ? Token::Kind::close_expression : Token::Kind::close_statement;
    m_brace_depth = 0;
  }

  // The tag's closing, or its next token.
  void lex_inside_tag() {
    skip_space();
    if (m_at >= m_src.size())
      fail_unclosed();
    if (close_tag())
      return;
    const int line = m_line, column = m_column;
    const char ch = m_src[m_at];
    if (ch == '\'' || ch == '"')
      push(Token::Kind::string, string_literal(ch), line, column);
    else if (std::isdigit(static_cast<unsigned char>(ch)))
      lex_number(line, column);
    else if (std::isalpha(static_cast<unsigned char>(ch)) || ch == '_')
      push(Token::Kind::name, word(), line, column);
    else
      lex_symbol(line, column);
  }

  // }} or %} (a }} inside an expression's braces closes a dict), with a dash: -}} and -%}.
  bool close_tag() {
    const int line = m_line, column = m_column;
    const std::string_view rest(m_src.data() + m_at, m_src.size() - m_at);
    const std::string_view close = m_closing == Token::Kind::close_expression ? "}}" : "%}";
    const bool dash_close = rest.size() >= 3 && rest[0] == '-' && rest.substr(1, 2) == close;
    if (!(rest.starts_with(close) && (m_closing == Token::Kind::close_statement || m_brace_depth == 0)) && !dash_close)
      return false;
    advance(dash_close ? 3 : 2);
    push(m_closing, std::string(close), line, column);
    m_inside = false;
    if (dash_close)
      skip_space();
    else if (m_closing == Token::Kind::close_statement)
      trim_newline();
    return true;
  }

  std::string string_literal(char quote) {
    std::string value;
    advance(1);
    while (true) {
      if (m_at >= m_src.size())
        fail("string literal is not closed");
      const char d = m_src[m_at];
      if (d == quote) {
        advance(1);
        return value;
      }
      if (d != '\\') {
        value.push_back(d);
        advance(1);
        continue;
      }
      if (m_at + 1 >= m_src.size())
        fail("string literal ends in a backslash");
      const char e = m_src[m_at + 1];
      advance(2);
      value += escaped(e);
    }
  }

  char escaped(char e) const {
    switch (e) {
    case 'n':
      return '\n';
    case 't':
      return '\t';
    case 'r':
      return '\r';
    case 'b':
      return '\b';
    case 'f':
      return '\f';
    case 'v':
      return '\v';
    case '\'':
    case '"':
    case '\\':
      return e;
    default:
      fail(fmt::format("unknown escape \\{} in a string literal", e));
    }
  }

  std::string digits() {
    std::string out;
    while (m_at < m_src.size() && std::isdigit(static_cast<unsigned char>(m_src[m_at]))) {
      out.push_back(m_src[m_at]);
      advance(1);
    }
    return out;
  }

  // An integer, or a float with a fractional part (not after a '.': x.0.1 is two subscripts).
  void lex_number(int line, int column) {
    std::string number = digits();
    const bool after_dot =
        !m_tokens.empty() && m_tokens.back().kind == Token::Kind::symbol && m_tokens.back().text == ".";
    if (after_dot || peek() != '.' || !std::isdigit(static_cast<unsigned char>(peek(1)))) {
      push(Token::Kind::integer, std::move(number), line, column);
      return;
    }
    number.push_back('.');
    advance(1);
    number += digits();
    push(Token::Kind::floating, std::move(number), line, column);
  }

  std::string word() {
    std::string out;
    while (m_at < m_src.size() && (std::isalnum(static_cast<unsigned char>(m_src[m_at])) || m_src[m_at] == '_')) {
      out.push_back(m_src[m_at]);
      advance(1);
    }
    return out;
  }

  void lex_symbol(int line, int column) {
    static const char* const symbols[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                          ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|", "?"};
    const std::string_view rest(m_src.data() + m_at, m_src.size() - m_at);
    for (const char* s : symbols) {
      if (!rest.starts_with(s))
        continue;
      const std::string text(s);
      if (text == "{")
        ++m_brace_depth;
      else if (text == "}")
        --m_brace_depth;
      advance(text.size());
      push(Token::Kind::symbol, text, line, column);
      return;
    }
    fail(fmt::format("unexpected character '{}'", m_src[m_at]));
  }

  const std::string m_src;
  const std::string& m_name;
  std::vector<Token> m_tokens;
  std::size_t m_at = 0;
  int m_line = 1, m_column = 1;
  std::size_t m_text_start = npos; // where the last text token began in the source
  bool m_inside = false;           // inside {{ }} or {% %}
  Token::Kind m_closing = Token::Kind::close_expression;
  int m_brace_depth = 0;
};

} // namespace

std::vector<Token>
tokenize(std::string_view source, const std::string& name, bool keep_trailing_newline) {
  return Lexer(source, name, keep_trailing_newline).run();
}

} // namespace optkit::jinja
