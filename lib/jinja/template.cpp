#include "jinja/template.hpp"

#include "core/error.hpp"
#include "core/text.hpp"
#include "jinja/builtins.hpp"
#include "jinja/lexer.hpp"
#include "jinja/parser.hpp"
#include "jinja/value.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

namespace optkit::jinja {

namespace {

using Kind = Value::Kind;

// A decimal index or literal as a 64-bit integer; nothing when it does not fit.
std::optional<std::int64_t>
parse_index(const std::string& text) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size())
    return std::nullopt;
  return value;
}

constexpr int kMaxCallDepth = 100;

struct LoopControl {
  enum class Kind { none, break_, continue_ } kind = Kind::none;
};

class Renderer final : public FilterHost {
public:
  Renderer(const std::string& name, std::uint64_t max_steps) : m_name(name), m_max_steps(max_steps) {
    m_scopes.emplace_back();
  }

  void define(const std::string& key, Value value) { m_scopes.front()[key] = std::move(value); }

  std::string render(const Body& body) {
    std::string out;
    LoopControl control;
    run(body, out, control);
    return out;
  }

private:
  const std::string& template_name() const override { return m_name; }
  [[noreturn]] void fail(int line, int column, const std::string& what) const {
    throw InputError(fmt::format("{}:{}:{}: {}", m_name, line, column, what));
  }
  using FilterHost::fail;

  void step(const Expr& at) {
    if (++m_steps > m_max_steps)
      fail(at, fmt::format("rendering took more than {} steps (a loop without end?)", m_max_steps));
  }

  Value lookup(const std::string& name) const {
    for (auto it = m_scopes.rbegin(); it != m_scopes.rend(); ++it)
      if (const auto found = it->find(name); found != it->end())
        return found->second;
    return Value{};
  }
  void assign(const std::string& name, Value value) { m_scopes.back()[name] = std::move(value); }

  // ---- statements ----

  void run(const Body& body, std::string& out, LoopControl& control) {
    for (const auto& s : body) {
      if (control.kind != LoopControl::Kind::none)
        return;
      run(*s, out, control);
      if (out.size() > kMaxOutput)
        fail(s->line, s->column, "the rendered text exceeds 64 MiB");
    }
  }

  void bind(const Expr& target, const Value& value) {
    if (target.kind == Expr::Kind::name) {
      assign(target.text, value);
    } else if (target.kind == Expr::Kind::attribute) {
      auto object = evaluate(*target.a);
      if (!object.is(Kind::object))
        fail(target, "cannot set an attribute on a " + object.type_name());
      if (holds(value, object))
        fail(target, "cannot set an attribute of a " + object.type_name() + " to a value that holds it");
      object.set(target.text, value);
    } else {
      if (!value.is(Kind::array) || value.array->size() != target.items.size())
        fail(target, fmt::format("cannot unpack a {} into {} names", value.type_name(), target.items.size()));
      for (std::size_t i = 0; i < target.items.size(); ++i)
        assign(target.items[i]->text, (*value.array)[i]);
    }
  }

  void run(const Stmt& s, std::string& out, LoopControl& control) {
    switch (s.kind) {
    case Stmt::Kind::text:
      out += s.text;
      return;
    case Stmt::Kind::output:
      out += evaluate(*s.expr).to_output();
      return;
    case Stmt::Kind::if_:
      run(evaluate(*s.expr).truthy() ? s.body : s.otherwise, out, control);
      return;
    case Stmt::Kind::set:
      if (s.expr) {
        bind(*s.target, evaluate(*s.expr));
      } else {
        std::string captured;
        LoopControl inner;
        run(s.body, captured, inner);
        bind(*s.target, Value::of(captured));
      }
      return;
    case Stmt::Kind::for_:
      run_for(s, out);
      return;
    case Stmt::Kind::macro:
      assign(s.text, make_macro(s));
      return;
    case Stmt::Kind::call_block: {
      // {% call m(args) %}body{% endcall %}: the macro sees the body as caller()
      const Stmt* block = &s;
      m_scopes.emplace_back();
      assign("caller", Value::callable([this, block](std::vector<Value>&, Kwargs&) {
               std::string text;
               LoopControl inner;
               run(block->body, text, inner);
               return Value::of(text);
             }));
      out += evaluate(*s.expr).to_output();
      m_scopes.pop_back();
      return;
    }
    case Stmt::Kind::filter_block: {
      std::string text;
      LoopControl inner;
      run(s.body, text, inner);
      Expr at;
      at.line = s.line;
      at.column = s.column;
      std::vector<Value> args;
      Kwargs kwargs;
      out += jinja::apply_filter(*this, s.text, Value::of(text), args, kwargs, at).to_output();
      return;
    }
    case Stmt::Kind::break_:
      control.kind = LoopControl::Kind::break_;
      return;
    case Stmt::Kind::continue_:
      control.kind = LoopControl::Kind::continue_;
      return;
    }
  }

  Array iterate(const Value& value, const Expr& at) override {
    if (value.is(Kind::array))
      return *value.array;
    if (value.is(Kind::object)) {
      Array keys;
      for (const auto& [k, v] : *value.object)
        keys.push_back(Value::of(k));
      return keys;
    }
    if (value.is(Kind::string)) {
      Array chars;
      for (std::size_t i = 0; i < value.string.size();) {
        std::size_t n = 1;
        const auto lead = static_cast<unsigned char>(value.string[i]);
        n = lead < 0x80 ? 1 : (lead & 0xe0) == 0xc0 ? 2 : (lead & 0xf0) == 0xe0 ? 3 : 4;
        chars.push_back(Value::of(value.string.substr(i, n)));
        i += n;
      }
      return chars;
    }
    if (value.is(Kind::undefined) || value.is(Kind::none))
      return {};
    fail(at, "cannot loop over a " + value.type_name());
  }

  void run_for(const Stmt& s, std::string& out) {
    const auto items = iterate(evaluate(*s.expr), *s.expr);
    m_scopes.emplace_back();
    Array kept;
    if (s.condition) {
      for (const auto& item : items) {
        bind(*s.target, item);
        if (evaluate(*s.condition).truthy())
          kept.push_back(item);
      }
    } else {
      kept = items;
    }
    const auto n = static_cast<std::int64_t>(kept.size());
    for (std::int64_t i = 0; i < n; ++i) {
      step(*s.expr);
      auto loop = Value::dict({{"index", Value::of(i + 1)},
                               {"index0", Value::of(i)},
                               {"revindex", Value::of(n - i)},
                               {"revindex0", Value::of(n - i - 1)},
                               {"first", Value::of(i == 0)},
                               {"last", Value::of(i == n - 1)},
                               {"length", Value::of(n)},
                               {"previtem", i > 0 ? kept[static_cast<std::size_t>(i - 1)] : Value{}},
                               {"nextitem", i + 1 < n ? kept[static_cast<std::size_t>(i + 1)] : Value{}}});
      assign("loop", loop);
      bind(*s.target, kept[static_cast<std::size_t>(i)]);
      LoopControl control;
      run(s.body, out, control);
      if (control.kind == LoopControl::Kind::break_)
        break;
    }
    if (n == 0) {
      LoopControl control;
      run(s.otherwise, out, control);
    }
    m_scopes.pop_back();
  }

  Value make_macro(const Stmt& s) {
    const Stmt* macro = &s;
    return Value::callable([this, macro](std::vector<Value>& args, Kwargs& kwargs) {
      if (++m_call_depth > kMaxCallDepth)
        fail(macro->line, macro->column, fmt::format("macro '{}' recursed deeper than {}", macro->text, kMaxCallDepth));
      std::map<std::string, Value> frame;
      for (std::size_t i = 0; i < macro->params.size(); ++i) {
        if (i < args.size())
          frame[macro->params[i]] = args[i];
        else if (macro->defaults[i])
          frame[macro->params[i]] = evaluate(*macro->defaults[i]);
      }
      for (auto& [key, value] : kwargs)
        frame[key] = value;
      m_scopes.push_back(std::move(frame));
      std::string text;
      LoopControl control;
      run(macro->body, text, control);
      m_scopes.pop_back();
      --m_call_depth;
      return Value::of(text);
    });
  }

  // ---- expressions ----

  Value evaluate(const Expr& e) {
    step(e);
    switch (e.kind) {
    case Expr::Kind::literal_string:
      return Value::of(e.text);
    case Expr::Kind::literal_integer: // the parser checked that it fits
      return Value::of(parse_index(e.text).value_or(0));
    case Expr::Kind::literal_float: // strtod, not stod: 1e999 is inf as in Python, not an exception
      return Value::of_float(std::strtod(e.text.c_str(), nullptr));
    case Expr::Kind::literal_bool:
      return Value::of(!e.text.empty());
    case Expr::Kind::literal_none:
      return Value::none();
    case Expr::Kind::name:
      return lookup(e.text);
    case Expr::Kind::list:
    case Expr::Kind::tuple: {
      Array items;
      for (const auto& item : e.items)
        items.push_back(evaluate(*item));
      auto v = Value::list(std::move(items));
      v.is_tuple = e.kind == Expr::Kind::tuple;
      return v;
    }
    case Expr::Kind::dict: {
      auto v = Value::dict();
      for (std::size_t i = 0; i + 1 < e.items.size(); i += 2)
        v.set(evaluate(*e.items[i]).to_output(), evaluate(*e.items[i + 1]));
      return v;
    }
    case Expr::Kind::attribute:
      return member(evaluate(*e.a), e.text, e);
    case Expr::Kind::subscript:
      return subscript(evaluate(*e.a), evaluate(*e.b), e);
    case Expr::Kind::slice:
      return slice(evaluate(*e.a), e);
    case Expr::Kind::call:
      return call(e);
    case Expr::Kind::filter: {
      auto [args, kwargs] = arguments(e);
      return jinja::apply_filter(*this, e.text, evaluate(*e.a), args, kwargs, e);
    }
    case Expr::Kind::test: {
      auto [args, kwargs] = arguments(e);
      const bool result = apply_test(e.text, evaluate(*e.a), args, e);
      return Value::of(e.negated ? !result : result);
    }
    case Expr::Kind::unary: {
      const auto v = evaluate(*e.a);
      if (e.text == "not")
        return Value::of(!v.truthy());
      if (v.is(Kind::integer))
        return Value::of(e.text == "-" ? -v.integer : v.integer);
      if (v.is(Kind::floating))
        return Value::of_float(e.text == "-" ? -v.floating : v.floating);
      fail(e, fmt::format("unary {} on a {}", e.text, v.type_name()));
    }
    case Expr::Kind::ternary:
      if (evaluate(*e.a).truthy())
        return evaluate(*e.b);
      return e.c ? evaluate(*e.c) : Value{};
    case Expr::Kind::binary:
      return binary(e);
    }
    fail(e, "unknown expression");
  }

  std::pair<std::vector<Value>, Kwargs> arguments(const Expr& e) {
    std::vector<Value> args;
    Kwargs kwargs;
    const auto positional = e.items.size() - e.keywords.size();
    for (std::size_t i = 0; i < e.items.size(); ++i) {
      auto v = evaluate(*e.items[i]);
      if (i < positional)
        args.push_back(std::move(v));
      else
        kwargs.emplace_back(e.keywords[i - positional], std::move(v));
    }
    return {std::move(args), std::move(kwargs)};
  }

  Value binary(const Expr& e) {
    const auto& op = e.text;
    if (op == "and") {
      auto left = evaluate(*e.a);
      return left.truthy() ? evaluate(*e.b) : left;
    }
    if (op == "or") {
      auto left = evaluate(*e.a);
      return left.truthy() ? left : evaluate(*e.b);
    }
    const auto left = evaluate(*e.a);
    const auto right = evaluate(*e.b);
    if (op == "~")
      return bounded(left.to_output() + right.to_output(), e);
    if (op == "==")
      return Value::of(equal(left, right));
    if (op == "!=")
      return Value::of(!equal(left, right));
    if (op == "in" || op == "not in") {
      bool found = false;
      if (right.is(Kind::string) && left.is(Kind::string))
        found = right.string.find(left.string) != std::string::npos;
      else if (right.is(Kind::array))
        found = std::any_of(right.array->begin(), right.array->end(), [&](const Value& v) { return equal(v, left); });
      else if (right.is(Kind::object))
        found = left.is(Kind::string) && right.find(left.string);
      else if (!right.is(Kind::undefined) && !right.is(Kind::none))
        fail(e, fmt::format("'in' needs a string, list or dict on its right, not a {}", right.type_name()));
      return Value::of(op == "in" ? found : !found);
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int order = 0;
      if (left.is_number() && right.is_number())
        order = left.number() < right.number() ? -1 : left.number() > right.number() ? 1 : 0;
      else if (left.is(Kind::string) && right.is(Kind::string))
        order = left.string.compare(right.string);
      else
        fail(e, fmt::format("cannot compare a {} with a {}", left.type_name(), right.type_name()));
      return Value::of(op == "<" ? order < 0 : op == ">" ? order > 0 : op == "<=" ? order <= 0 : order >= 0);
    }
    if (op == "+") {
      if (left.is(Kind::string) && right.is(Kind::string))
        return bounded(left.string + right.string, e);
      if (left.is(Kind::array) && right.is(Kind::array)) {
        Array items = *left.array;
        items.insert(items.end(), right.array->begin(), right.array->end());
        return Value::list(std::move(items));
      }
    }
    if (left.is_number() && right.is_number()) {
      const bool ints = left.is(Kind::integer) && right.is(Kind::integer);
      const double a = left.number(), b = right.number();
      std::int64_t r = 0;
      if (op == "+")
        return ints && !__builtin_add_overflow(left.integer, right.integer, &r) ? Value::of(r) : Value::of_float(a + b);
      if (op == "-")
        return ints && !__builtin_sub_overflow(left.integer, right.integer, &r) ? Value::of(r) : Value::of_float(a - b);
      if (op == "*")
        return ints && !__builtin_mul_overflow(left.integer, right.integer, &r) ? Value::of(r) : Value::of_float(a * b);
      if (op == "/") {
        if (b == 0)
          fail(e, "division by zero");
        return Value::of_float(a / b);
      }
      if (op == "//" || op == "%") {
        if (b == 0)
          fail(e, "division by zero");
        if (ints && !(left.integer == INT64_MIN && right.integer == -1)) {
          // Python floors; C++ truncates toward zero
          std::int64_t q = left.integer / right.integer;
          if ((left.integer % right.integer != 0) && ((left.integer < 0) != (right.integer < 0)))
            --q;
          return op == "//" ? Value::of(q) : Value::of(left.integer - q * right.integer);
        }
        const double q = std::floor(a / b);
        return op == "//" ? Value::of_float(q) : Value::of_float(a - q * b);
      }
      if (op == "**") {
        const double p = std::pow(a, b);
        return ints && right.integer >= 0 && std::fabs(p) < 9.2e18 ? Value::of(static_cast<std::int64_t>(p))
                                                                   : Value::of_float(p);
      }
    }
    if (op == "*" && left.is(Kind::string) && right.is(Kind::integer)) {
      std::string out;
      for (std::int64_t i = 0; i < right.integer && out.size() <= kMaxOutput; ++i)
        out += left.string;
      return Value::of(out);
    }
    fail(e, fmt::format("'{}' is not defined for a {} and a {}", op, left.type_name(), right.type_name()));
  }

  Value bounded(std::string text, const Expr& at) const {
    if (text.size() > kMaxOutput)
      fail(at, "a string grew beyond 64 MiB");
    return Value::of(std::move(text));
  }

  Value subscript(const Value& object, const Value& index, const Expr& at) {
    if (object.is(Kind::array) && index.is(Kind::integer)) {
      auto i = index.integer;
      const auto n = static_cast<std::int64_t>(object.array->size());
      if (i < 0)
        i += n;
      return i >= 0 && i < n ? (*object.array)[static_cast<std::size_t>(i)] : Value{};
    }
    if (object.is(Kind::string) && index.is(Kind::integer)) {
      auto chars = iterate(object, at);
      auto i = index.integer;
      if (i < 0)
        i += static_cast<std::int64_t>(chars.size());
      return i >= 0 && i < static_cast<std::int64_t>(chars.size()) ? chars[static_cast<std::size_t>(i)] : Value{};
    }
    if (object.is(Kind::object) && index.is(Kind::string))
      return member(object, index.string, at);
    if (object.is(Kind::undefined) || object.is(Kind::none))
      fail(at, "cannot subscript an undefined value");
    return Value{};
  }

  Value slice(const Value& object, const Expr& e) {
    const auto bound = [&](const ExprPtr& p) -> std::optional<std::int64_t> {
      if (!p)
        return std::nullopt;
      const auto v = evaluate(*p);
      if (v.is(Kind::none) || v.is(Kind::undefined))
        return std::nullopt;
      if (!v.is(Kind::integer))
        fail(*p, "slice bounds must be integers");
      return v.integer;
    };
    const auto start = bound(e.items[0]), stop = bound(e.items[1]), stride = bound(e.items[2]);
    const std::int64_t step_by = stride.value_or(1);
    if (step_by == 0)
      fail(e, "slice step cannot be zero");
    Array items = object.is(Kind::array) ? *object.array : iterate(object, e);
    const auto n = static_cast<std::int64_t>(items.size());
    const auto clamp = [&](std::optional<std::int64_t> v, std::int64_t fallback) {
      if (!v)
        return fallback;
      auto x = *v < 0 ? *v + n : *v;
      return step_by > 0 ? std::clamp<std::int64_t>(x, 0, n) : std::clamp<std::int64_t>(x, -1, n - 1);
    };
    const auto from = clamp(start, step_by > 0 ? 0 : n - 1);
    const auto to = clamp(stop, step_by > 0 ? n : -1);
    Array out;
    for (auto i = from; step_by > 0 ? i < to : i > to; i += step_by)
      out.push_back(items[static_cast<std::size_t>(i)]);
    if (object.is(Kind::string)) {
      std::string text;
      for (const auto& c : out)
        text += c.string;
      return Value::of(text);
    }
    return Value::list(std::move(out));
  }

  // Attributes: dict members, then the methods of strings, dicts and lists.
  Value member(const Value& object, const std::string& name, const Expr& at) override {
    if (object.is(Kind::object)) {
      if (const auto* v = object.find(name))
        return *v;
      if (object.is_namespace)
        return Value{};
    }
    if (object.is(Kind::array) && !name.empty() && std::isdigit(static_cast<unsigned char>(name[0]))) {
      const auto index = parse_index(name);
      return index ? subscript(object, Value::of(*index), at) : Value{};
    }
    if (object.is(Kind::undefined) || object.is(Kind::none))
      fail(at, fmt::format("cannot read '{}' of an undefined value", name));
    if (auto method = bound_method(object, name); method.is(Kind::function))
      return method;
    return Value{};
  }

  Value call(const Expr& e);
  bool apply_test(const std::string& name, const Value& value, std::vector<Value>& args, const Expr& at) override;

  const std::string& m_name;
  std::vector<std::map<std::string, Value>> m_scopes;
  std::uint64_t m_max_steps;
  std::uint64_t m_steps = 0;
  int m_call_depth = 0;
};

Value
Renderer::call(const Expr& e) {
  auto [args, kwargs] = arguments(e);
  if (e.a->kind == Expr::Kind::name) {
    const auto& name = e.a->text;
    const auto bound = lookup(name);
    if (!bound.is(Kind::function)) {
      if (name == "range") {
        std::int64_t start = 0, stop = 0, by = 1;
        if (args.size() == 1)
          stop = args[0].integer;
        else if (args.size() >= 2)
          start = args[0].integer, stop = args[1].integer, by = args.size() > 2 ? args[2].integer : 1;
        if (by == 0)
          fail(e, "range() step cannot be zero");
        // range(-2**63, 2**63 - 1) has a span that overflows: it is too long either way
        std::int64_t span = 0;
        if (__builtin_sub_overflow(stop, start, &span))
          fail(e, "range() is too long");
        const std::int64_t count = span / by + (span % by != 0 ? 1 : 0);
        if (count > static_cast<std::int64_t>(m_max_steps))
          fail(e, "range() is too long");
        Array items;
        for (std::int64_t k = 0; k < count; ++k) // start + k*by stays between start and stop
          items.push_back(Value::of(start + k * by));
        return Value::list(std::move(items));
      }
      if (name == "namespace" || name == "dict") {
        auto ns = Value::dict();
        ns.is_namespace = name == "namespace";
        if (!args.empty() && args[0].is(Kind::object))
          for (const auto& [k, v] : *args[0].object)
            ns.set(k, v);
        for (auto& [k, v] : kwargs)
          ns.set(k, v);
        return ns;
      }
      if (name == "raise_exception")
        fail(e, "the template raised an error: " + (args.empty() ? std::string() : args[0].to_output()));
      if (name == "strftime_now") {
        const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
        std::tm local{};
        localtime_r(&now, &local);
        char buffer[256];
        const auto format = args.empty() ? std::string("%Y-%m-%d") : args[0].to_output();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral" // the template chooses the format, as strftime_now intends
        const auto n = std::strftime(buffer, sizeof buffer, format.c_str(), &local);
#pragma GCC diagnostic pop
        return Value::of(std::string(buffer, n));
      }
      fail(e, fmt::format("'{}' is not a function the template defines or optkit provides", name));
    }
    return (*bound.function)(args, kwargs);
  }
  const auto callee = evaluate(*e.a);
  if (!callee.is(Kind::function))
    fail(e, "calling something that is not a function" +
                (e.a->kind == Expr::Kind::attribute ? " ('" + e.a->text + "')" : std::string()));
  return (*callee.function)(args, kwargs);
}

bool
Renderer::apply_test(const std::string& name, const Value& value, std::vector<Value>& args, const Expr& at) {
  if (name == "defined")
    return !value.is(Kind::undefined);
  if (name == "undefined")
    return value.is(Kind::undefined);
  if (name == "none")
    return value.is(Kind::none);
  if (name == "string")
    return value.is(Kind::string);
  if (name == "number")
    return value.is_number();
  if (name == "integer")
    return value.is(Kind::integer);
  if (name == "float")
    return value.is(Kind::floating);
  if (name == "boolean")
    return value.is(Kind::boolean);
  if (name == "true" || name == "false")
    return value.is(Kind::boolean) && value.boolean == (name == "true");
  if (name == "mapping")
    return value.is(Kind::object);
  if (name == "sequence" || name == "iterable")
    return value.is(Kind::array) || value.is(Kind::string) || (name == "iterable" && value.is(Kind::object));
  if (name == "callable")
    return value.is(Kind::function);
  if (name == "odd" || name == "even")
    return value.is(Kind::integer) && (value.integer % 2 != 0) == (name == "odd");
  if (name == "lower" || name == "upper")
    return value.is(Kind::string) && ascii_case(value.string, name == "upper") == value.string;
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas")
    return !args.empty() && equal(value, args[0]);
  if (name == "ne" || name == "!=")
    return args.empty() || !equal(value, args[0]);
  if (name == "in") {
    if (args.empty())
      return false;
    const auto& container = args[0];
    if (container.is(Kind::array))
      return std::any_of(container.array->begin(), container.array->end(),
                         [&](const Value& v) { return equal(v, value); });
    if (container.is(Kind::string))
      return value.is(Kind::string) && container.string.find(value.string) != std::string::npos;
    if (container.is(Kind::object))
      return value.is(Kind::string) && container.find(value.string);
    return false;
  }
  fail(at, fmt::format("test '{}' is not supported", name));
}

} // namespace

Template
Template::parse(std::string_view source, const std::string& name, bool keep_trailing_newline) {
  Template t;
  t.m_name = name;
  t.m_body = std::make_shared<const Body>(jinja::parse(tokenize(source, name, keep_trailing_newline), name));
  return t;
}

std::string
Template::render(const nlohmann::ordered_json& context, std::uint64_t max_steps) const {
  Renderer renderer(m_name, max_steps);
  if (context.is_object())
    for (const auto& [key, value] : context.items())
      renderer.define(key, Value::from_json(value));
  return renderer.render(*m_body);
}

} // namespace optkit::jinja
