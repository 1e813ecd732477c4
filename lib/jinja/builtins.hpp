// What templates call beside their own macros: the methods of Python's str, dict and list
// (jinja/methods.cpp) and Jinja's filters (jinja/filters.cpp), each a small function in a table.
#pragma once

#include "jinja/ast.hpp"
#include "jinja/value.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace optkit::jinja {

// The most bytes a render (or one string it builds) may reach.
inline constexpr std::size_t kMaxOutput = 64u << 20;
inline constexpr std::int64_t kMaxJsonIndent = 1024; // tojson(indent=…)

// A call's keyword argument `name` (null when absent).
const Value* kwarg(const Kwargs& kwargs, std::string_view name);
// Positional argument i, else keyword `name`, else fallback.
Value arg(const std::vector<Value>& args, const Kwargs& kwargs, std::size_t i, std::string_view name,
          Value fallback = {});

// Python's str.strip(chars) (whitespace when `chars` is empty), from the left and/or the right.
std::string strip_chars(const std::string& s, const std::string& chars, bool left, bool right);
// Python's str.title() on ASCII letters.
std::string title_case(const std::string& s);
// Python's str.capitalize() on ASCII letters.
std::string capitalized(const std::string& s);

// `self.name` as a callable when `self` (a string, dict or list) has that method, e.g. s.split(),
// d.items(), l.append(x); an undefined Value otherwise.
Value bound_method(const Value& self, const std::string& name);

// What filters need of the renderer that applies them.
class FilterHost {
public:
  // The items a for-loop visits: a list's values, a dict's keys, a string's characters.
  virtual Array iterate(const Value& value, const Expr& at) = 0;
  // `object.name`: a dict member, a list index, or a method.
  virtual Value member(const Value& object, const std::string& name, const Expr& at) = 0;
  // `value is name(args)`.
  virtual bool apply_test(const std::string& name, const Value& value, std::vector<Value>& args, const Expr& at) = 0;
  // The template's name, for errors.
  virtual const std::string& template_name() const = 0;
  // Throws InputError naming the template and position.
  [[noreturn]] void fail(const Expr& at, const std::string& what) const;

protected:
  ~FilterHost() = default;
};

// `value | name(args)`; InputError (through host.fail) for a filter optkit does not provide.
Value apply_filter(FilterHost& host, const std::string& name, const Value& value, std::vector<Value>& args,
                   Kwargs& kwargs, const Expr& at);

} // namespace optkit::jinja
