#include "jinja/parser.hpp"

#include "core/error.hpp"

#include <charconv>
#include <cstdint>
#include <fmt/format.h>

namespace optkit::jinja {

namespace {

constexpr int kMaxDepth = 200;

class Parser {
public:
  Parser(const std::vector<Token>& tokens, const std::string& name) : m_tokens(tokens), m_name(name) {}

  Body parse_template() {
    Body body = parse_body({});
    if (peek().kind != Token::Kind::end)
      fail(peek(), "unexpected tag");
    return body;
  }

private:
  [[noreturn]] void fail(const Token& at, const std::string& what) const {
    throw InputError(fmt::format("{}:{}:{}: {}", m_name, at.line, at.column, what));
  }
  const Token& peek(std::size_t ahead = 0) const { return m_tokens[std::min(m_pos + ahead, m_tokens.size() - 1)]; }
  const Token& next() { return m_tokens[std::min(m_pos++, m_tokens.size() - 1)]; }
  bool is_symbol(const char* s, std::size_t ahead = 0) const {
    return peek(ahead).kind == Token::Kind::symbol && peek(ahead).text == s;
  }
  bool is_name(const char* s, std::size_t ahead = 0) const {
    return peek(ahead).kind == Token::Kind::name && peek(ahead).text == s;
  }
  void expect_symbol(const char* s) {
    if (!is_symbol(s))
      fail(peek(), fmt::format("expected '{}' but found '{}'", s, peek().text));
    ++m_pos;
  }
  void expect_name(const char* s) {
    if (!is_name(s))
      fail(peek(), fmt::format("expected '{}' but found '{}'", s, peek().text));
    ++m_pos;
  }
  void expect_close_statement() {
    if (peek().kind != Token::Kind::close_statement)
      fail(peek(), fmt::format("expected '%}}' but found '{}'", peek().text));
    ++m_pos;
  }
  std::string expect_identifier() {
    if (peek().kind != Token::Kind::name)
      fail(peek(), fmt::format("expected a name but found '{}'", peek().text));
    return next().text;
  }

  struct DepthGuard {
    int& depth;
    DepthGuard(int& d, const Parser& p, const Token& at) : depth(d) {
      if (++depth > kMaxDepth)
        p.fail(at, fmt::format("nesting deeper than {} levels", kMaxDepth));
    }
    ~DepthGuard() { --depth; }
  };

  // Statements until one of `stop` tags ({% name %}) is next; that tag is not consumed.
  Body parse_body(std::vector<std::string> stop) {
    DepthGuard guard(m_depth, *this, peek());
    Body body;
    while (true) {
      const auto& t = peek();
      if (t.kind == Token::Kind::end) {
        if (!stop.empty())
          fail(t, fmt::format("missing {{% {} %}}", stop.front()));
        return body;
      }
      if (t.kind == Token::Kind::text) {
        auto s = std::make_unique<Stmt>(Stmt{Stmt::Kind::text, t.line, t.column, t.text});
        body.push_back(std::move(s));
        ++m_pos;
      } else if (t.kind == Token::Kind::open_expression) {
        ++m_pos;
        auto s = std::make_unique<Stmt>(Stmt{Stmt::Kind::output, t.line, t.column});
        s->expr = parse_expression();
        if (peek().kind != Token::Kind::close_expression)
          fail(peek(), fmt::format("expected '}}}}' but found '{}'", peek().text));
        ++m_pos;
        body.push_back(std::move(s));
      } else if (t.kind == Token::Kind::open_statement) {
        const auto& tag = peek(1);
        for (const auto& s : stop)
          if (tag.kind == Token::Kind::name && tag.text == s)
            return body;
        ++m_pos;
        body.push_back(parse_statement());
      } else {
        fail(t, fmt::format("unexpected '{}'", t.text));
      }
    }
  }

  StmtPtr parse_statement() {
    const auto& tag = peek();
    if (tag.kind != Token::Kind::name)
      fail(tag, "expected a statement name after {%");
    const std::string name = next().text;
    auto s = std::make_unique<Stmt>(Stmt{Stmt::Kind::text, tag.line, tag.column});
    if (name == "if") {
      return parse_if(tag);
    } else if (name == "for") {
      s->kind = Stmt::Kind::for_;
      s->target = parse_target();
      expect_name("in");
      s->expr = parse_or(); // not parse_expression: a trailing "if" filters the loop, it is no ternary
      if (is_name("if")) {
        ++m_pos;
        s->condition = parse_expression();
      }
      expect_close_statement();
      s->body = parse_body({"else", "endfor"});
      if (is_name("else", 1)) {
        m_pos += 2;
        expect_close_statement();
        s->otherwise = parse_body({"endfor"});
      }
      m_pos += 2;
      expect_close_statement();
    } else if (name == "set") {
      s->kind = Stmt::Kind::set;
      s->target = parse_target();
      if (is_symbol("=")) {
        ++m_pos;
        s->expr = parse_expression();
        expect_close_statement();
      } else {
        expect_close_statement();
        s->body = parse_body({"endset"});
        m_pos += 2;
        expect_close_statement();
      }
    } else if (name == "macro") {
      s->kind = Stmt::Kind::macro;
      s->text = expect_identifier();
      expect_symbol("(");
      while (!is_symbol(")")) {
        s->params.push_back(expect_identifier());
        if (is_symbol("=")) {
          ++m_pos;
          s->defaults.push_back(parse_expression());
        } else {
          s->defaults.push_back(nullptr);
        }
        if (!is_symbol(")"))
          expect_symbol(",");
      }
      ++m_pos;
      expect_close_statement();
      s->body = parse_body({"endmacro"});
      m_pos += 2;
      expect_close_statement();
    } else if (name == "call") {
      s->kind = Stmt::Kind::call_block;
      s->expr = parse_expression();
      expect_close_statement();
      s->body = parse_body({"endcall"});
      m_pos += 2;
      expect_close_statement();
    } else if (name == "filter") {
      s->kind = Stmt::Kind::filter_block;
      s->text = expect_identifier();
      expect_close_statement();
      s->body = parse_body({"endfilter"});
      m_pos += 2;
      expect_close_statement();
    } else if (name == "break" || name == "continue") {
      s->kind = name == "break" ? Stmt::Kind::break_ : Stmt::Kind::continue_;
      expect_close_statement();
    } else {
      fail(tag, fmt::format("'{{% {} %}}' is not supported", name));
    }
    return s;
  }

  StmtPtr parse_if(const Token& tag) {
    auto s = std::make_unique<Stmt>(Stmt{Stmt::Kind::if_, tag.line, tag.column});
    s->expr = parse_expression();
    expect_close_statement();
    s->body = parse_body({"elif", "else", "endif"});
    if (is_name("elif", 1)) {
      m_pos += 2;
      s->otherwise.push_back(parse_if(peek()));
      return s; // the nested if consumed the endif
    }
    if (is_name("else", 1)) {
      m_pos += 2;
      expect_close_statement();
      s->otherwise = parse_body({"endif"});
    }
    m_pos += 2;
    expect_close_statement();
    return s;
  }

  // A loop or assignment target: name, name.attribute, or names separated by commas.
  ExprPtr parse_target() {
    const auto& t = peek();
    auto first = make(Expr::Kind::name, t);
    first->text = expect_identifier();
    if (is_symbol(".")) {
      ++m_pos;
      auto attr = make(Expr::Kind::attribute, t);
      attr->a = std::move(first);
      attr->text = expect_identifier();
      return attr;
    }
    if (!is_symbol(","))
      return first;
    auto tuple = make(Expr::Kind::tuple, t);
    tuple->items.push_back(std::move(first));
    while (is_symbol(",")) {
      ++m_pos;
      auto item = make(Expr::Kind::name, peek());
      item->text = expect_identifier();
      tuple->items.push_back(std::move(item));
    }
    return tuple;
  }

  ExprPtr make(Expr::Kind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->column = at.column;
    return e;
  }

  ExprPtr parse_expression() {
    DepthGuard guard(m_depth, *this, peek());
    auto value = parse_or();
    if (is_name("if")) {
      const auto& at = next();
      auto t = make(Expr::Kind::ternary, at);
      t->a = parse_or();
      t->b = std::move(value);
      if (is_name("else")) {
        ++m_pos;
        t->c = parse_expression();
      }
      return t;
    }
    return value;
  }

  ExprPtr binary(const Token& at, std::string op, ExprPtr left, ExprPtr right) {
    auto e = make(Expr::Kind::binary, at);
    e->text = std::move(op);
    e->a = std::move(left);
    e->b = std::move(right);
    return e;
  }

  ExprPtr parse_or() {
    auto left = parse_and();
    while (is_name("or")) {
      const auto& at = next();
      left = binary(at, "or", std::move(left), parse_and());
    }
    return left;
  }
  ExprPtr parse_and() {
    auto left = parse_not();
    while (is_name("and")) {
      const auto& at = next();
      left = binary(at, "and", std::move(left), parse_not());
    }
    return left;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(m_depth, *this, peek());
      const auto& at = next();
      auto e = make(Expr::Kind::unary, at);
      e->text = "not";
      e->a = parse_not();
      return e;
    }
    return parse_comparison();
  }
  ExprPtr parse_comparison() {
    auto left = parse_concat();
    while (true) {
      const auto& at = peek();
      std::string op;
      if (at.kind == Token::Kind::symbol && (at.text == "==" || at.text == "!=" || at.text == "<" || at.text == ">" ||
                                             at.text == "<=" || at.text == ">="))
        op = next().text;
      else if (is_name("in"))
        op = (++m_pos, "in");
      else if (is_name("not") && is_name("in", 1))
        op = (m_pos += 2, "not in");
      else
        return left;
      left = binary(at, op, std::move(left), parse_concat());
    }
  }
  ExprPtr parse_concat() {
    auto left = parse_additive();
    while (is_symbol("~")) {
      const auto& at = next();
      left = binary(at, "~", std::move(left), parse_additive());
    }
    return left;
  }
  ExprPtr parse_additive() {
    auto left = parse_multiplicative();
    while (is_symbol("+") || is_symbol("-")) {
      const auto& at = next();
      left = binary(at, at.text, std::move(left), parse_multiplicative());
    }
    return left;
  }
  ExprPtr parse_multiplicative() {
    auto left = parse_unary();
    while (is_symbol("*") || is_symbol("/") || is_symbol("//") || is_symbol("%")) {
      const auto& at = next();
      left = binary(at, at.text, std::move(left), parse_unary());
    }
    return left;
  }
  ExprPtr parse_unary() {
    if (is_symbol("-") || is_symbol("+")) {
      DepthGuard guard(m_depth, *this, peek());
      const auto& at = next();
      auto e = make(Expr::Kind::unary, at);
      e->text = at.text;
      e->a = parse_unary();
      return e;
    }
    return parse_power();
  }
  ExprPtr parse_power() {
    auto left = parse_filtered();
    if (is_symbol("**")) {
      const auto& at = next();
      return binary(at, "**", std::move(left), parse_unary());
    }
    return left;
  }
  // postfix filters and tests bind tighter than arithmetic: a | f(x) is test b
  ExprPtr parse_filtered() {
    auto value = parse_postfix();
    while (true) {
      if (is_symbol("|")) {
        const auto& at = next();
        auto f = make(Expr::Kind::filter, at);
        f->text = expect_identifier();
        f->a = std::move(value);
        if (is_symbol("("))
          parse_arguments(*f);
        value = std::move(f);
      } else if (is_name("is")) {
        const auto& at = next();
        auto t = make(Expr::Kind::test, at);
        if (is_name("not")) {
          ++m_pos;
          t->negated = true;
        }
        t->text = expect_identifier();
        t->a = std::move(value);
        if (is_symbol("("))
          parse_arguments(*t);
        else if (peek().kind == Token::Kind::string || peek().kind == Token::Kind::integer)
          t->items.push_back(parse_primary());
        value = std::move(t);
      } else {
        return value;
      }
    }
  }
  void parse_arguments(Expr& call) {
    expect_symbol("(");
    while (!is_symbol(")")) {
      if (peek().kind == Token::Kind::name && is_symbol("=", 1)) {
        call.keywords.push_back(next().text);
        ++m_pos;
        call.items.push_back(parse_expression());
      } else {
        if (!call.keywords.empty())
          fail(peek(), "a positional argument after keyword arguments");
        call.items.push_back(parse_expression());
      }
      if (!is_symbol(")"))
        expect_symbol(",");
    }
    ++m_pos;
  }
  ExprPtr parse_postfix() {
    auto value = parse_primary();
    while (true) {
      if (is_symbol(".")) {
        const auto& at = next();
        auto e = make(Expr::Kind::attribute, at);
        e->a = std::move(value);
        if (peek().kind == Token::Kind::integer)
          e->text = next().text;
        else
          e->text = expect_identifier();
        value = std::move(e);
      } else if (is_symbol("[")) {
        const auto& at = next();
        ExprPtr parts[3];
        int part = 0;
        bool slice = false;
        while (!is_symbol("]")) {
          if (is_symbol(":")) {
            slice = true;
            if (++part > 2)
              fail(peek(), "a slice has at most three parts");
            ++m_pos;
            continue;
          }
          parts[part] = parse_expression();
        }
        ++m_pos;
        auto e = make(slice ? Expr::Kind::slice : Expr::Kind::subscript, at);
        e->a = std::move(value);
        if (slice) {
          e->items.push_back(std::move(parts[0]));
          e->items.push_back(std::move(parts[1]));
          e->items.push_back(std::move(parts[2]));
        } else {
          if (!parts[0])
            fail(at, "empty subscript");
          e->b = std::move(parts[0]);
        }
        value = std::move(e);
      } else if (is_symbol("(")) {
        auto e = make(Expr::Kind::call, peek());
        e->a = std::move(value);
        parse_arguments(*e);
        value = std::move(e);
      } else {
        return value;
      }
    }
  }
  ExprPtr parse_primary() {
    DepthGuard guard(m_depth, *this, peek());
    const auto& t = peek();
    switch (t.kind) {
    case Token::Kind::string: {
      auto e = make(Expr::Kind::literal_string, t);
      while (peek().kind == Token::Kind::string) // adjacent literals concatenate
        e->text += next().text;
      return e;
    }
    case Token::Kind::integer: {
      std::int64_t value = 0;
      const auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), value);
      if (ec != std::errc{} || end != t.text.data() + t.text.size())
        fail(t, fmt::format("integer literal '{}' does not fit in 64 bits", t.text));
      auto e = make(Expr::Kind::literal_integer, next());
      e->text = t.text;
      return e;
    }
    case Token::Kind::floating: {
      auto e = make(Expr::Kind::literal_float, next());
      e->text = t.text;
      return e;
    }
    case Token::Kind::name: {
      ++m_pos;
      if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
        auto e = make(Expr::Kind::literal_bool, t);
        e->text = t.text == "true" || t.text == "True" ? "1" : "";
        return e;
      }
      if (t.text == "none" || t.text == "None")
        return make(Expr::Kind::literal_none, t);
      auto e = make(Expr::Kind::name, t);
      e->text = t.text;
      return e;
    }
    case Token::Kind::symbol:
      if (t.text == "(") {
        ++m_pos;
        auto first = parse_expression();
        if (is_symbol(")")) {
          ++m_pos;
          return first;
        }
        auto tuple = make(Expr::Kind::tuple, t);
        tuple->items.push_back(std::move(first));
        while (is_symbol(",")) {
          ++m_pos;
          if (is_symbol(")"))
            break;
          tuple->items.push_back(parse_expression());
        }
        expect_symbol(")");
        return tuple;
      }
      if (t.text == "[") {
        ++m_pos;
        auto list = make(Expr::Kind::list, t);
        while (!is_symbol("]")) {
          list->items.push_back(parse_expression());
          if (!is_symbol("]"))
            expect_symbol(",");
        }
        ++m_pos;
        return list;
      }
      if (t.text == "{") {
        ++m_pos;
        auto dict = make(Expr::Kind::dict, t);
        while (!is_symbol("}")) {
          dict->items.push_back(parse_expression());
          expect_symbol(":");
          dict->items.push_back(parse_expression());
          if (!is_symbol("}"))
            expect_symbol(",");
        }
        ++m_pos;
        return dict;
      }
      break;
    default:
      break;
    }
    fail(t, t.kind == Token::Kind::end ? "unexpected end of template" : fmt::format("unexpected '{}'", t.text));
  }

  const std::vector<Token>& m_tokens;
  const std::string& m_name;
  std::size_t m_pos = 0;
  int m_depth = 0;
};

} // namespace

Body
parse(const std::vector<Token>& tokens, const std::string& name) {
  return Parser(tokens, name).parse_template();
}

} // namespace optkit::jinja
