#include "jinja/builtins.hpp"

#include "core/error.hpp"
#include "core/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>

namespace optkit::jinja {

namespace {

using Kind = Value::Kind;

// One application of a filter: `value | name(args, kwargs)` at `at`.
struct FilterCall {
  FilterHost& host;
  const std::string& name;
  const Value& value;
  std::vector<Value>& args;
  Kwargs& kwargs;
  const Expr& at;

  Value arg(std::size_t i, std::string_view keyword, Value fallback = {}) const {
    return jinja::arg(args, kwargs, i, keyword, std::move(fallback));
  }
  Array items() const { return host.iterate(value, at); }
};

using Filter = Value (*)(const FilterCall& c);

Value
length(const FilterCall& c) {
  if (c.value.is(Kind::array))
    return Value::of(static_cast<std::int64_t>(c.value.array->size()));
  if (c.value.is(Kind::object))
    return Value::of(static_cast<std::int64_t>(c.value.object->size()));
  if (c.value.is(Kind::string))
    return Value::of(static_cast<std::int64_t>(c.items().size()));
  c.host.fail(c.at, "length of a " + c.value.type_name());
}

Value
default_value(const FilterCall& c) {
  const bool boolean = c.arg(1, "boolean", Value::of(false)).truthy();
  const bool use_default = c.value.is(Kind::undefined) || (boolean && !c.value.truthy());
  return use_default ? c.arg(0, "default_value", Value::of(std::string())) : c.value;
}

// tojson(indent=N): a negative N is an error, as @huggingface/jinja's " ".repeat(N) is, and so is
// one past kMaxJsonIndent (a template's 2 or 4 is far below it; fuzzing found −4 and 10^9).
Value
tojson(const FilterCall& c) {
  const auto indent = c.arg(0, "indent");
  if (!indent.is(Kind::integer))
    return Value::of(to_json(c.value));
  if (indent.integer < 0 || indent.integer > kMaxJsonIndent)
    c.host.fail(c.at, fmt::format("tojson indent {} is not from 0 to {}", indent.integer, kMaxJsonIndent));
  return Value::of(to_json(c.value, static_cast<int>(indent.integer)));
}

Value
string(const FilterCall& c) {
  return Value::of(c.value.to_output());
}

// safe, e, escape: chat templates render text, not HTML.
Value
unchanged(const FilterCall& c) {
  return c.value;
}

Value
trim(const FilterCall& c) {
  const auto chars = c.arg(0, "chars");
  return Value::of(strip_chars(c.value.to_output(), chars.is(Kind::string) ? chars.string : std::string(), true, true));
}

Value
change_case(const FilterCall& c) {
  if (c.name == "title")
    return Value::of(title_case(c.value.to_output()));
  if (c.name == "capitalize")
    return Value::of(capitalized(c.value.to_output()));
  return Value::of(ascii_case(c.value.to_output(), c.name == "upper"));
}

Value
to_int(const FilterCall& c) {
  const auto& value = c.value;
  if (value.is(Kind::integer))
    return value;
  if (value.is(Kind::floating)) // NaN and out-of-range values have no integer: take the default
    return std::isfinite(value.floating) && std::fabs(value.floating) < 9.2e18
               ? Value::of(static_cast<std::int64_t>(value.floating))
               : c.arg(0, "default", Value::of(std::int64_t{0}));
  try {
    return Value::of(static_cast<std::int64_t>(std::stoll(value.to_output())));
  } catch (const std::exception&) {
    return c.arg(0, "default", Value::of(std::int64_t{0}));
  }
}

Value
to_float(const FilterCall& c) {
  if (c.value.is_number())
    return Value::of_float(c.value.number());
  try {
    return Value::of_float(std::stod(c.value.to_output()));
  } catch (const std::exception&) {
    return Value::of_float(0);
  }
}

Value
absolute(const FilterCall& c) {
  const auto& value = c.value;
  return value.is(Kind::integer) && value.integer != INT64_MIN
             ? Value::of(value.integer < 0 ? -value.integer : value.integer)
             : Value::of_float(std::fabs(value.number()));
}

Value
list(const FilterCall& c) {
  return Value::list(c.items());
}

Value
first_or_last(const FilterCall& c) {
  const auto items = c.items();
  return items.empty() ? Value{} : (c.name == "first" ? items.front() : items.back());
}

Value
reverse(const FilterCall& c) {
  auto items = c.items();
  std::reverse(items.begin(), items.end());
  if (!c.value.is(Kind::string))
    return Value::list(std::move(items));
  std::string s;
  for (const auto& ch : items)
    s += ch.string;
  return Value::of(s);
}

Value
join(const FilterCall& c) {
  const auto separator = c.arg(0, "d", Value::of(std::string())).to_output();
  const auto attribute = c.arg(1, "attribute");
  std::string out;
  const auto items = c.items();
  for (std::size_t i = 0; i < items.size(); ++i)
    out += (i ? separator : std::string()) +
           (attribute.is(Kind::string) ? c.host.member(items[i], attribute.string, c.at) : items[i]).to_output();
  return Value::of(out);
}

Value
dict_items(const FilterCall& c) {
  if (!c.value.is(Kind::object))
    c.host.fail(c.at, c.name + " of a " + c.value.type_name() + " (it needs a dict)");
  return (*bound_method(c.value, "items").function)(c.args, c.kwargs);
}

Value
unique(const FilterCall& c) {
  Array out;
  for (const auto& item : c.items())
    if (std::none_of(out.begin(), out.end(), [&](const Value& v) { return equal(v, item); }))
      out.push_back(item);
  return Value::list(std::move(out));
}

Value
sort(const FilterCall& c) {
  auto items = c.items();
  const bool reversed = c.arg(0, "reverse", Value::of(false)).truthy();
  const auto attribute = c.arg(2, "attribute");
  const auto key = [&](const Value& v) {
    return attribute.is(Kind::string) ? c.host.member(v, attribute.string, c.at) : v;
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const auto a = key(x), b = key(y);
    const bool less = a.is_number() && b.is_number() ? a.number() < b.number() : a.to_output() < b.to_output();
    const bool greater = a.is_number() && b.is_number() ? a.number() > b.number() : a.to_output() > b.to_output();
    return reversed ? greater : less;
  });
  return Value::list(std::move(items));
}

// select, reject (the items themselves), selectattr, rejectattr (an attribute of each), by a test.
Value
select(const FilterCall& c) {
  const bool by_attribute = c.name == "selectattr" || c.name == "rejectattr";
  const bool keep_if = c.name == "selectattr" || c.name == "select";
  const auto attribute = by_attribute && !c.args.empty() ? c.args[0].to_output() : std::string();
  const std::size_t test_at = by_attribute ? 1 : 0;
  Array out;
  for (const auto& item : c.items()) {
    const auto subject = by_attribute ? (item.is(Kind::object) ? c.host.member(item, attribute, c.at) : Value{}) : item;
    bool passes;
    if (c.args.size() <= test_at) {
      passes = subject.truthy();
    } else {
      std::vector<Value> test_args(c.args.begin() + static_cast<std::ptrdiff_t>(test_at) + 1, c.args.end());
      passes = c.host.apply_test(c.args[test_at].to_output(), subject, test_args, c.at);
    }
    if (passes == keep_if)
      out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value
map(const FilterCall& c) {
  Array out;
  const auto* attribute = kwarg(c.kwargs, "attribute");
  for (const auto& item : c.items()) {
    if (attribute) {
      auto v = item.is(Kind::object) ? c.host.member(item, attribute->to_output(), c.at) : Value{};
      if (v.is(Kind::undefined))
        if (const auto* fallback = kwarg(c.kwargs, "default"))
          v = *fallback;
      out.push_back(v);
    } else if (!c.args.empty()) {
      std::vector<Value> rest(c.args.begin() + 1, c.args.end());
      Kwargs none;
      out.push_back(apply_filter(c.host, c.args[0].to_output(), item, rest, none, c.at));
    } else {
      c.host.fail(c.at, "map needs a filter name or attribute=");
    }
  }
  return Value::list(std::move(out));
}

Value
replace(const FilterCall& c) {
  auto method = bound_method(Value::of(c.value.to_output()), "replace");
  return (*method.function)(c.args, c.kwargs);
}

Value
indent(const FilterCall& c) {
  const auto width = c.arg(0, "width", Value::of(std::int64_t{4}));
  const bool first = c.arg(1, "first", Value::of(false)).truthy();
  const bool blank = c.arg(2, "blank", Value::of(false)).truthy();
  if (width.is(Kind::integer) && width.integer > static_cast<std::int64_t>(kMaxOutput))
    c.host.fail(c.at, "indent width is too large");
  const std::string pad = width.is(Kind::string)
                              ? width.string
                              : std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, width.integer)), ' ');
  const auto text = c.value.to_output();
  std::string out;
  std::size_t start = 0;
  bool first_line = true;
  while (true) {
    const auto end = text.find('\n', start);
    const auto line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if ((first_line ? first : true) && (blank || !line.empty()))
      out += pad;
    out += line;
    if (end == std::string::npos)
      break;
    out += '\n';
    start = end + 1;
    first_line = false;
  }
  return Value::of(out);
}

Value
round(const FilterCall& c) {
  const auto precision = c.arg(0, "precision", Value::of(std::int64_t{0}));
  const double scale = std::pow(10.0, static_cast<double>(precision.integer));
  return Value::of_float(std::round(c.value.number() * scale) / scale);
}

Value
dictsort(const FilterCall& c) {
  auto items = *dict_items(c).array;
  std::stable_sort(items.begin(), items.end(),
                   [](const Value& a, const Value& b) { return (*a.array)[0].string < (*b.array)[0].string; });
  return Value::list(std::move(items));
}

const std::map<std::string, Filter, std::less<>> kFilters = {{"length", length},
                                                             {"count", length},
                                                             {"default", default_value},
                                                             {"d", default_value},
                                                             {"tojson", tojson},
                                                             {"string", string},
                                                             {"safe", unchanged},
                                                             {"e", unchanged},
                                                             {"escape", unchanged},
                                                             {"trim", trim},
                                                             {"upper", change_case},
                                                             {"lower", change_case},
                                                             {"title", change_case},
                                                             {"capitalize", change_case},
                                                             {"int", to_int},
                                                             {"float", to_float},
                                                             {"abs", absolute},
                                                             {"list", list},
                                                             {"first", first_or_last},
                                                             {"last", first_or_last},
                                                             {"reverse", reverse},
                                                             {"join", join},
                                                             {"items", dict_items},
                                                             {"unique", unique},
                                                             {"sort", sort},
                                                             {"select", select},
                                                             {"reject", select},
                                                             {"selectattr", select},
                                                             {"rejectattr", select},
                                                             {"map", map},
                                                             {"replace", replace},
                                                             {"indent", indent},
                                                             {"round", round},
                                                             {"dictsort", dictsort}};

} // namespace

void
FilterHost::fail(const Expr& at, const std::string& what) const {
  throw InputError(fmt::format("{}:{}:{}: {}", template_name(), at.line, at.column, what));
}

Value
apply_filter(FilterHost& host, const std::string& name, const Value& value, std::vector<Value>& args, Kwargs& kwargs,
             const Expr& at) {
  const auto it = kFilters.find(name);
  if (it == kFilters.end())
    host.fail(at, fmt::format("filter '{}' is not supported", name));
  return it->second(FilterCall{host, name, value, args, kwargs, at});
}

} // namespace optkit::jinja
