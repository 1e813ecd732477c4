#include "core/error.hpp"
#include "core/text.hpp"
#include "jinja/builtins.hpp"

#include <algorithm>
#include <cctype>
#include <map>

namespace optkit::jinja {

namespace {

using Kind = Value::Kind;
using Args = std::vector<Value>;

// A method of a str, given the string, the name it was called by (for methods that share one
// function), the arguments and the keywords.
using StringMethod = Value (*)(const std::string& s, const std::string& name, Args& args, Kwargs& kwargs);
// A method of a dict or list, given the object itself (calls see and change the same object).
using ValueMethod = Value (*)(const Value& self, const std::string& name, Args& args, Kwargs& kwargs);

Value
change_case(const std::string& s, const std::string& name, Args&, Kwargs&) {
  if (name == "title")
    return Value::of(title_case(s));
  if (name == "capitalize")
    return Value::of(capitalized(s));
  return Value::of(ascii_case(s, name == "upper"));
}

Value
strip(const std::string& s, const std::string& name, Args& args, Kwargs&) {
  const auto chars = !args.empty() && args[0].is(Kind::string) ? args[0].string : std::string();
  return Value::of(strip_chars(s, chars, name != "rstrip", name != "lstrip"));
}

Value
starts_or_ends_with(const std::string& s, const std::string& name, Args& args, Kwargs&) {
  std::vector<std::string> options;
  if (!args.empty() && args[0].is(Kind::array)) {
    for (const auto& v : *args[0].array)
      options.push_back(v.to_output());
  } else if (!args.empty()) {
    options.push_back(args[0].to_output());
  }
  return Value::of(std::any_of(options.begin(), options.end(), [&](const std::string& o) {
    return name == "startswith" ? s.starts_with(o) : s.ends_with(o);
  }));
}

// Python's str.split on runs of whitespace, at most `remaining` splits (-1: all).
Array
split_on_whitespace(const std::string& s, std::int64_t remaining) {
  Array parts;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
      ++i;
    if (i >= s.size())
      break;
    if (remaining == 0) {
      parts.push_back(Value::of(strip_chars(s.substr(i), "", false, true)));
      break;
    }
    std::size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j])))
      ++j;
    parts.push_back(Value::of(s.substr(i, j - i)));
    --remaining;
    i = j;
  }
  return parts;
}

Value
split(const std::string& s, const std::string&, Args& args, Kwargs& kwargs) {
  const auto sep = arg(args, kwargs, 0, "sep");
  const auto limit = arg(args, kwargs, 1, "maxsplit", Value::of(std::int64_t{-1}));
  std::int64_t remaining = limit.is(Kind::integer) ? limit.integer : -1;
  if (!sep.is(Kind::string) || sep.string.empty())
    return Value::list(split_on_whitespace(s, remaining));
  Array parts;
  std::size_t start = 0;
  for (std::size_t at = s.find(sep.string); at != std::string::npos && remaining != 0;
       at = s.find(sep.string, start), --remaining) {
    parts.push_back(Value::of(s.substr(start, at - start)));
    start = at + sep.string.size();
  }
  parts.push_back(Value::of(s.substr(start)));
  return Value::list(std::move(parts));
}

Value
replace(const std::string& s, const std::string&, Args& args, Kwargs& kwargs) {
  const auto from = arg(args, kwargs, 0, "old").to_output(), to = arg(args, kwargs, 1, "new").to_output();
  const auto count = arg(args, kwargs, 2, "count", Value::of(std::int64_t{-1}));
  std::string out = s;
  std::int64_t left = count.is(Kind::integer) ? count.integer : -1;
  if (from.empty())
    return Value::of(out);
  for (std::size_t at = out.find(from); at != std::string::npos && left != 0;
       at = out.find(from, at + to.size()), --left)
    out.replace(at, from.size(), to);
  return Value::of(out);
}

Value
find(const std::string& s, const std::string&, Args& args, Kwargs&) {
  const auto at = s.find(args.empty() ? std::string() : args[0].to_output());
  return Value::of(at == std::string::npos ? std::int64_t{-1} : static_cast<std::int64_t>(at));
}

Value
join(const std::string& s, const std::string&, Args& args, Kwargs&) {
  std::string out;
  if (!args.empty() && args[0].is(Kind::array))
    for (std::size_t i = 0; i < args[0].array->size(); ++i)
      out += (i ? s : std::string()) + (*args[0].array)[i].to_output();
  return Value::of(out);
}

Value
items(const Value& self, const std::string&, Args&, Kwargs&) {
  Array out;
  for (const auto& [k, v] : *self.object) {
    auto pair = Value::list({Value::of(k), v});
    pair.is_tuple = true;
    out.push_back(pair);
  }
  return Value::list(std::move(out));
}

Value
keys_or_values(const Value& self, const std::string& name, Args&, Kwargs&) {
  Array out;
  for (const auto& [k, v] : *self.object)
    out.push_back(name == "keys" ? Value::of(k) : v);
  return Value::list(std::move(out));
}

Value
get(const Value& self, const std::string&, Args& args, Kwargs&) {
  const auto* found = args.empty() ? nullptr : self.find(args[0].to_output());
  return found ? *found : (args.size() > 1 ? args[1] : Value::none());
}

// Python's list.index: lm-eval's ARC target is labels.index(answerKey).
Value
index(const Value& self, const std::string&, Args& args, Kwargs&) {
  if (args.size() != 1)
    throw InputError("list.index() takes one argument");
  for (std::size_t i = 0; i < self.array->size(); ++i)
    if (equal((*self.array)[i], args[0]))
      return Value::of(static_cast<std::int64_t>(i));
  throw InputError(to_json(args[0]) + " is not in list " + to_json(self));
}

Value
append(const Value& self, const std::string&, Args& args, Kwargs&) {
  for (auto& a : args) {
    if (holds(a, self))
      throw InputError("cannot append to a list a value that holds the list");
    self.array->push_back(a);
  }
  return Value::none();
}

const std::map<std::string, StringMethod, std::less<>> kStringMethods = {{"upper", change_case},
                                                                         {"lower", change_case},
                                                                         {"title", change_case},
                                                                         {"capitalize", change_case},
                                                                         {"strip", strip},
                                                                         {"lstrip", strip},
                                                                         {"rstrip", strip},
                                                                         {"startswith", starts_or_ends_with},
                                                                         {"endswith", starts_or_ends_with},
                                                                         {"split", split},
                                                                         {"replace", replace},
                                                                         {"find", find},
                                                                         {"join", join}};
const std::map<std::string, ValueMethod, std::less<>> kDictMethods = {
    {"items", items}, {"keys", keys_or_values}, {"values", keys_or_values}, {"get", get}};
const std::map<std::string, ValueMethod, std::less<>> kListMethods = {{"index", index}, {"append", append}};

} // namespace

const Value*
kwarg(const Kwargs& kwargs, std::string_view name) {
  for (const auto& [k, v] : kwargs)
    if (k == name)
      return &v;
  return nullptr;
}

Value
arg(const std::vector<Value>& args, const Kwargs& kwargs, std::size_t i, std::string_view name, Value fallback) {
  if (i < args.size())
    return args[i];
  if (const auto* v = kwarg(kwargs, name))
    return *v;
  return fallback;
}

std::string
strip_chars(const std::string& s, const std::string& chars, bool left, bool right) {
  const auto strip = [&](char c) {
    return chars.empty() ? (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v')
                         : chars.find(c) != std::string::npos;
  };
  std::size_t begin = 0, end = s.size();
  if (left)
    while (begin < end && strip(s[begin]))
      ++begin;
  if (right)
    while (end > begin && strip(s[end - 1]))
      --end;
  return s.substr(begin, end - begin);
}

std::string
title_case(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (auto& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
      start = false;
    } else {
      start = true;
    }
  }
  return out;
}

std::string
capitalized(const std::string& s) {
  auto out = ascii_case(s, false);
  if (!out.empty())
    out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

Value
bound_method(const Value& self, const std::string& name) {
  if (self.is(Kind::string))
    if (const auto it = kStringMethods.find(name); it != kStringMethods.end())
      return Value::callable([s = self.string, name, method = it->second](Args& args, Kwargs& kwargs) {
        return method(s, name, args, kwargs);
      });
  const auto* table = self.is(Kind::object) ? &kDictMethods : self.is(Kind::array) ? &kListMethods : nullptr;
  if (table)
    if (const auto it = table->find(name); it != table->end())
      return Value::callable(
          [self, name, method = it->second](Args& args, Kwargs& kwargs) { return method(self, name, args, kwargs); });
  return Value{};
}

} // namespace optkit::jinja
