// The values a chat template computes with: undefined, none, booleans, integers, floats, strings,
// lists (and tuples), insertion-ordered dicts (and namespaces), and callables (macros, builtins).
// Lists and dicts are shared by reference, as in Python, so `ns.x = ...` and list.append are seen
// through every name bound to them.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace optkit::jinja {

struct Value;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;
using Kwargs = std::vector<std::pair<std::string, Value>>;
using Callable = std::function<Value(std::vector<Value>& args, Kwargs& kwargs)>;

struct Value {
  enum class Kind { undefined, none, boolean, integer, floating, string, array, object, function };
  Kind kind = Kind::undefined;
  bool boolean = false;
  std::int64_t integer = 0;
  double floating = 0;
  std::string string;
  std::shared_ptr<Array> array;
  std::shared_ptr<Object> object;
  std::shared_ptr<Callable> function;
  bool is_tuple = false;
  bool is_namespace = false;

  static Value none() { return make(Kind::none); }
  static Value of(bool b);
  static Value of(std::int64_t i);
  static Value of_float(double f);
  static Value of(std::string s);
  static Value list(Array items = {});
  static Value dict(Object items = {});
  static Value callable(Callable fn);
  static Value from_json(const nlohmann::ordered_json& json);
  static Value make(Kind kind) {
    Value v;
    v.kind = kind;
    return v;
  }

  bool is(Kind k) const { return kind == k; }
  bool is_number() const { return kind == Kind::integer || kind == Kind::floating; }
  double number() const { return kind == Kind::integer ? static_cast<double>(integer) : floating; }
  // Python truthiness.
  bool truthy() const;
  // A dict member; nullptr when absent.
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value value);
  // The text `{{ value }}` renders (none and undefined render nothing).
  std::string to_output() const;
  std::string type_name() const;
};

// Lists and dicts nest at most this deep: equal, to_json and holds refuse a deeper value with
// InputError, so a template cannot overflow the stack by nesting a list in itself in a loop.
inline constexpr int kMaxValueDepth = 256;

bool equal(const Value& a, const Value& b, int depth = 0);

// JSON as the tojson filter writes it: ", " and ": " separators (or "," with an indent), keys in
// insertion order, non-ASCII kept.
std::string to_json(const Value& value, int indent = 0, int depth = 0);

// Whether `value` is the list or dict `container` or holds it at any depth: storing it there would
// make a value that contains itself (which no renderer can print, and which is never freed).
bool holds(const Value& value, const Value& container, int depth = 0);

} // namespace optkit::jinja
