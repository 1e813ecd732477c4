#include "jinja/value.hpp"

#include "core/error.hpp"

#include <cmath>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace optkit::jinja {

Value
Value::of(bool b) {
  auto v = make(Kind::boolean);
  v.boolean = b;
  return v;
}

Value
Value::of(std::int64_t i) {
  auto v = make(Kind::integer);
  v.integer = i;
  return v;
}

Value
Value::of_float(double f) {
  auto v = make(Kind::floating);
  v.floating = f;
  return v;
}

Value
Value::of(std::string s) {
  auto v = make(Kind::string);
  v.string = std::move(s);
  return v;
}

Value
Value::list(Array items) {
  auto v = make(Kind::array);
  v.array = std::make_shared<Array>(std::move(items));
  return v;
}

Value
Value::dict(Object items) {
  auto v = make(Kind::object);
  v.object = std::make_shared<Object>(std::move(items));
  return v;
}

Value
Value::callable(Callable fn) {
  auto v = make(Kind::function);
  v.function = std::make_shared<Callable>(std::move(fn));
  return v;
}

Value
Value::from_json(const nlohmann::ordered_json& json) {
  switch (json.type()) {
  case nlohmann::ordered_json::value_t::null:
    return none();
  case nlohmann::ordered_json::value_t::boolean:
    return of(json.get<bool>());
  case nlohmann::ordered_json::value_t::number_integer:
  case nlohmann::ordered_json::value_t::number_unsigned:
    return of(json.get<std::int64_t>());
  case nlohmann::ordered_json::value_t::number_float:
    return of_float(json.get<double>());
  case nlohmann::ordered_json::value_t::string:
    return of(json.get<std::string>());
  case nlohmann::ordered_json::value_t::array: {
    Array items;
    for (const auto& item : json)
      items.push_back(from_json(item));
    return list(std::move(items));
  }
  case nlohmann::ordered_json::value_t::object: {
    Object items;
    for (const auto& [key, item] : json.items())
      items.emplace_back(key, from_json(item));
    return dict(std::move(items));
  }
  default:
    return Value{};
  }
}

bool
Value::truthy() const {
  switch (kind) {
  case Kind::undefined:
  case Kind::none:
    return false;
  case Kind::boolean:
    return boolean;
  case Kind::integer:
    return integer != 0;
  case Kind::floating:
    return floating != 0;
  case Kind::string:
    return !string.empty();
  case Kind::array:
    return !array->empty();
  case Kind::object:
    return !object->empty();
  case Kind::function:
    return true;
  }
  return false;
}

const Value*
Value::find(std::string_view key) const {
  if (kind != Kind::object)
    return nullptr;
  for (const auto& [k, v] : *object)
    if (k == key)
      return &v;
  return nullptr;
}

void
Value::set(const std::string& key, Value value) {
  for (auto& [k, v] : *object)
    if (k == key) {
      v = std::move(value);
      return;
    }
  object->emplace_back(key, std::move(value));
}

std::string
Value::type_name() const {
  switch (kind) {
  case Kind::undefined:
    return "undefined";
  case Kind::none:
    return "none";
  case Kind::boolean:
    return "boolean";
  case Kind::integer:
    return "integer";
  case Kind::floating:
    return "float";
  case Kind::string:
    return "string";
  case Kind::array:
    return is_tuple ? "tuple" : "list";
  case Kind::object:
    return is_namespace ? "namespace" : "dict";
  case Kind::function:
    return "function";
  }
  return "?";
}

namespace {

// A number as JavaScript's String() spells it (what the reference renderer prints).
std::string
js_number(double f) {
  if (std::isnan(f))
    return "NaN";
  if (std::isinf(f))
    return f > 0 ? "Infinity" : "-Infinity";
  if (f == std::floor(f) && std::fabs(f) < 1e21)
    return fmt::format("{:.0f}", f);
  return fmt::format("{}", f);
}

} // namespace

std::string
Value::to_output() const {
  switch (kind) {
  case Kind::undefined:
  case Kind::none:
    return "";
  case Kind::boolean:
    return boolean ? "true" : "false";
  case Kind::integer:
    return std::to_string(integer);
  case Kind::floating:
    if (floating == 0)
      return std::signbit(floating) ? "-0.0" : "0.0";
    if (floating == std::floor(floating) && std::fabs(floating) < 1e21)
      return js_number(floating) + ".0"; // a float that is whole prints as one: 2.0, -3.0
    return js_number(floating);
  case Kind::string:
    return string;
  case Kind::array:
  case Kind::object:
    return to_json(*this);
  case Kind::function:
    return "[function]";
  }
  return "";
}

namespace {

void
check_depth(int depth) {
  if (depth > kMaxValueDepth)
    throw InputError(fmt::format("a template value nests lists or dicts deeper than {} levels", kMaxValueDepth));
}

} // namespace

bool
equal(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number())
    return a.number() == b.number();
  if (a.kind != b.kind)
    return false;
  switch (a.kind) {
  case Value::Kind::undefined:
  case Value::Kind::none:
    return true;
  case Value::Kind::boolean:
    return a.boolean == b.boolean;
  case Value::Kind::string:
    return a.string == b.string;
  case Value::Kind::array:
    if (a.array->size() != b.array->size())
      return false;
    for (std::size_t i = 0; i < a.array->size(); ++i)
      if (!equal((*a.array)[i], (*b.array)[i], depth + 1))
        return false;
    return true;
  case Value::Kind::object:
    return a.object == b.object || to_json(a) == to_json(b);
  default:
    return a.function == b.function;
  }
}

std::string
to_json(const Value& value, int indent, int depth) {
  check_depth(depth);
  switch (value.kind) {
  case Value::Kind::undefined:
  case Value::Kind::none:
    return "null";
  case Value::Kind::boolean:
    return value.boolean ? "true" : "false";
  case Value::Kind::integer:
    return std::to_string(value.integer);
  case Value::Kind::floating:
    return js_number(value.floating);
  case Value::Kind::string:
    return nlohmann::json(value.string).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  case Value::Kind::array:
  case Value::Kind::object: {
    const std::string item_separator = indent ? "," : ", ";
    const std::string base = "\n" + std::string(static_cast<std::size_t>(indent * depth), ' ');
    const std::string child = base + std::string(static_cast<std::size_t>(indent), ' ');
    std::vector<std::string> parts;
    if (value.kind == Value::Kind::array)
      for (const auto& item : *value.array)
        parts.push_back(to_json(item, indent, depth + 1));
    else
      for (const auto& [key, item] : *value.object)
        parts.push_back(to_json(Value::of(key)) + ": " + to_json(item, indent, depth + 1));
    const char open = value.kind == Value::Kind::array ? '[' : '{';
    const char close = value.kind == Value::Kind::array ? ']' : '}';
    std::string out(1, open);
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (indent)
        out += (i ? item_separator : std::string()) + child;
      else if (i)
        out += item_separator;
      out += parts[i];
    }
    if (indent && !parts.empty())
      out += base;
    out.push_back(close);
    return out;
  }
  case Value::Kind::function:
    return "null";
  }
  return "null";
}

bool
holds(const Value& value, const Value& container, int depth) {
  check_depth(depth);
  if (value.kind == Value::Kind::array) {
    if (container.kind == Value::Kind::array && value.array == container.array)
      return true;
    for (const auto& item : *value.array)
      if (holds(item, container, depth + 1))
        return true;
  } else if (value.kind == Value::Kind::object) {
    if (container.kind == Value::Kind::object && value.object == container.object)
      return true;
    for (const auto& [key, item] : *value.object)
      if (holds(item, container, depth + 1))
        return true;
  }
  return false;
}

} // namespace optkit::jinja
