#include "tune/search_space.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/resource_paths.hpp"
#include "core/text.hpp"
#include "core/yaml_schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

namespace optkit::tune {

namespace {

using config::Field;
using config::Schema;
using config::Type;

const Schema&
space_schema() {
  static const Schema schema = [] {
    Field choices{"choices", Type::list, false, "the values of a categorical parameter"};
    choices.item = std::make_shared<const Field>(Field{"choice", Type::string, true, "one value"});
    Field kind{"type", Type::string, true, "int, float or categorical"};
    kind.choices = {"int", "float", "categorical"};
    Schema parameter{"parameter",
                     {Field{"name", Type::string, true, "the logical knob (e.g. max_num_seqs)"}, kind,
                      Field{"low", Type::number, false, "smallest value (int, float)"},
                      Field{"high", Type::number, false, "largest value (int, float)"},
                      Field{"step", Type::number, false, "grid spacing (int: default 1; float: none)"},
                      Field{"log", Type::boolean, false, "sample on a log scale (low > 0)"},
                      Field{"default", Type::string, false, "the engine's default value (the baseline configuration)"},
                      Field{"neighbor_step", Type::number, false, "hill-climb step (a factor when log-scaled)"},
                      choices,
                      Field{"when", Type::string, false, "active only when another parameter has a value: 'p=v1|v2'"}}};
    Field parameters{"parameters", Type::list, true, "the knobs searched, in order"};
    parameters.item = std::make_shared<const Field>(
        Field{"parameter", Type::object, true, "one knob", {}, {}, {}, std::make_shared<const Schema>(parameter)});
    return Schema{"search space",
                  {Field{"name", Type::string, true, "the space's name"},
                   Field{"description", Type::string, false, "one line for people"}, parameters}};
  }();
  return schema;
}

[[noreturn]] void
fail(const std::string& source, const std::string& what) {
  throw InputError(source + ": " + what);
}

Parameter
parse_parameter(const nlohmann::json& p, const std::string& source, const std::vector<Parameter>& before) {
  Parameter out;
  out.name = p.at("name").get<std::string>();
  const std::string where = fmt::format("parameter '{}'", out.name);
  const std::string type = p.at("type").get<std::string>();
  out.kind = type == "int" ? ParamKind::integer : type == "float" ? ParamKind::real : ParamKind::categorical;
  if (out.kind == ParamKind::categorical) {
    for (const char* key : {"low", "high", "step", "log"})
      if (p.contains(key))
        fail(source, fmt::format("{}: '{}' does not apply to a categorical parameter (use choices)", where, key));
    if (!p.contains("choices") || p.at("choices").empty())
      fail(source, where + ": a categorical parameter needs a non-empty 'choices' list");
    for (const auto& c : p.at("choices"))
      out.choices.push_back(c.get<std::string>());
    if (std::set<std::string>(out.choices.begin(), out.choices.end()).size() != out.choices.size())
      fail(source, where + ": 'choices' repeats a value");
    out.low = 0;
    out.high = static_cast<double>(out.choices.size() - 1);
  } else {
    if (p.contains("choices"))
      fail(source, where + ": 'choices' applies only to a categorical parameter");
    if (!p.contains("low") || !p.contains("high"))
      fail(source, where + ": an " + type + " parameter needs 'low' and 'high'");
    out.low = p.at("low").get<double>();
    out.high = p.at("high").get<double>();
    out.log = p.value("log", false);
    if (p.contains("step"))
      out.step = p.at("step").get<double>();
    if (out.kind == ParamKind::integer) {
      if (out.low != std::floor(out.low) || out.high != std::floor(out.high))
        fail(source, where + ": 'low' and 'high' of an int parameter must be integers");
      if (out.step && (*out.step != std::floor(*out.step)))
        fail(source, where + ": the 'step' of an int parameter must be an integer");
    }
    if (!(out.low < out.high))
      fail(source, fmt::format("{}: low {} must be below high {}", where, out.low, out.high));
    if (out.log && out.low <= 0)
      fail(source, fmt::format("{}: a log-scaled parameter needs low > 0 (it is {})", where, out.low));
    if (out.step && !(*out.step > 0))
      fail(source, where + ": 'step' must be positive");
    if (out.log && out.step && *out.step != 1)
      fail(source, where + ": 'log' and a 'step' other than 1 cannot be combined (as in Optuna)");
    if (out.stepped()) {
      // Past 2^53 steps a double no longer holds every grid point, and the counts overflow.
      const double cells = (out.high - out.low) / out.grid_step();
      if (!(cells <= 9007199254740992.0))
        fail(source,
             fmt::format("{}: (high − low) / step = {} steps is more than a grid can hold (2^53)", where, cells));
      if (out.step && !out.log && std::abs(cells - std::round(cells)) > 1e-9 * std::max(1.0, cells))
        fail(source,
             fmt::format("{}: high − low = {} is not a multiple of step {}", where, out.high - out.low, *out.step));
    }
  }
  if (p.contains("neighbor_step")) {
    out.neighbor_step = p.at("neighbor_step").get<double>();
    if (!(*out.neighbor_step > 0) || (out.log && *out.neighbor_step <= 1))
      fail(source, where + ": 'neighbor_step' must be positive (a factor above 1 when log-scaled)");
  }
  if (p.contains("default")) {
    const std::string text = p.at("default").get<std::string>();
    nlohmann::json value = text;
    if (out.kind != ParamKind::categorical) {
      char* end = nullptr;
      const double x = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0')
        fail(source, fmt::format("{}: default '{}' is not a number", where, text));
      value = x;
    }
    try {
      const double x = out.internal(value);
      if (out.kind != ParamKind::categorical && (x < out.low || x > out.high))
        throw InputError(fmt::format("default {} is outside [{}, {}]", text, out.low, out.high));
      out.default_value = out.external(x);
      if (out.kind != ParamKind::categorical && out.default_value->get<double>() != x)
        throw InputError(fmt::format("default {} is not on the parameter's grid", text));
    } catch (const InputError& e) {
      fail(source, where + ": " + e.what());
    }
  }
  if (p.contains("when")) {
    const std::string when = p.at("when").get<std::string>();
    const auto eq = when.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == when.size())
      fail(source, fmt::format("{}: when '{}' must read 'param=value' or 'param=v1|v2'", where, when));
    out.when_param = std::string(trim(when.substr(0, eq)));
    for (const auto& v : split(when.substr(eq + 1), '|'))
      out.when_values.emplace_back(trim(v));
    const auto parent =
        std::find_if(before.begin(), before.end(), [&](const Parameter& q) { return q.name == out.when_param; });
    if (parent == before.end())
      fail(source,
           fmt::format("{}: when names '{}', which is not a parameter listed before it", where, out.when_param));
    if (parent->kind == ParamKind::categorical)
      for (const auto& v : out.when_values)
        if (std::find(parent->choices.begin(), parent->choices.end(), v) == parent->choices.end())
          fail(source, fmt::format("{}: when value '{}' is not one of {}'s choices ({})", where, v, parent->name,
                                   join(parent->choices, ", ")));
  }
  return out;
}

} // namespace

std::string
value_text(const nlohmann::json& value) {
  if (value.is_string())
    return value.get<std::string>();
  if (value.is_number_integer())
    return std::to_string(value.get<std::int64_t>());
  if (value.is_number()) {
    const double v = value.get<double>();
    if (v == std::floor(v) && std::abs(v) < 1e15)
      return std::to_string(static_cast<std::int64_t>(v));
    return fmt::format("{}", v);
  }
  return value.dump();
}

double
Parameter::internal(const nlohmann::json& value) const {
  if (kind == ParamKind::categorical) {
    const std::string text = value_text(value);
    const auto it = std::find(choices.begin(), choices.end(), text);
    if (it == choices.end())
      throw InputError(fmt::format("knob '{}': '{}' is not one of {}", name, text, join(choices, ", ")));
    return static_cast<double>(it - choices.begin());
  }
  if (!value.is_number())
    throw InputError(fmt::format("knob '{}': '{}' is not a number", name, value.dump()));
  return value.get<double>();
}

nlohmann::json
Parameter::external(double x) const {
  if (kind == ParamKind::categorical) {
    const auto i =
        static_cast<std::size_t>(std::clamp(std::llround(x), 0LL, static_cast<long long>(choices.size() - 1)));
    return choices[i];
  }
  if (stepped()) {
    const double q = grid_step();
    x = std::round((x - low) / q) * q + low;
  }
  x = std::clamp(x, low, high);
  if (kind == ParamKind::integer)
    return static_cast<std::int64_t>(std::llround(x));
  return x;
}

std::size_t
Parameter::grid_count(std::size_t points) const {
  if (kind == ParamKind::categorical)
    return choices.size();
  if (stepped()) // the parser keeps (high − low) / step within 2^53
    return static_cast<std::size_t>(std::llround((high - low) / grid_step())) + 1;
  return std::max<std::size_t>(points, 2);
}

std::vector<nlohmann::json>
Parameter::grid(std::size_t points) const {
  std::vector<nlohmann::json> out;
  if (kind == ParamKind::categorical) {
    for (const auto& c : choices)
      out.emplace_back(c);
    return out;
  }
  if (stepped()) {
    const double q = grid_step();
    const auto cells = static_cast<std::int64_t>(grid_count(points) - 1);
    for (std::int64_t i = 0; i <= cells; ++i)
      out.push_back(external(low + static_cast<double>(i) * q));
    return out;
  }
  const std::size_t n = std::max<std::size_t>(points, 2);
  for (std::size_t i = 0; i < n; ++i) {
    const double f = static_cast<double>(i) / static_cast<double>(n - 1);
    out.push_back(log ? std::exp(std::log(low) + f * (std::log(high) - std::log(low))) : low + f * (high - low));
  }
  return out;
}

const Parameter*
SearchSpace::find(const std::string& knob) const {
  for (const auto& p : parameters)
    if (p.name == knob)
      return &p;
  return nullptr;
}

bool
SearchSpace::active(const Parameter& parameter, const nlohmann::json& config) const {
  if (parameter.when_param.empty())
    return true;
  if (!config.contains(parameter.when_param))
    return false;
  const std::string text = value_text(config.at(parameter.when_param));
  return std::find(parameter.when_values.begin(), parameter.when_values.end(), text) != parameter.when_values.end();
}

void
SearchSpace::check(const nlohmann::json& config) const {
  if (!config.is_object())
    throw InputError("a configuration must be a JSON object of knob values");
  for (const auto& [knob, value] : config.items()) {
    const Parameter* p = find(knob);
    if (!p)
      throw InputError(fmt::format("knob '{}' is not in search space '{}'", knob, name));
    if (!active(*p, config))
      throw InputError(
          fmt::format("knob '{}' is set but inactive ({} is not {})", knob, p->when_param, join(p->when_values, "|")));
    const double x = p->internal(value);
    if (p->kind != ParamKind::categorical) {
      if (x < p->low || x > p->high)
        throw InputError(fmt::format("knob '{}' = {} is outside [{}, {}]", knob, value_text(value), p->low, p->high));
      if (p->stepped() && std::abs(p->external(x).get<double>() - x) > 1e-9 * std::max(1.0, std::abs(x)))
        throw InputError(
            fmt::format("knob '{}' = {} is not on its grid (step {})", knob, value_text(value), p->grid_step()));
    }
  }
  for (const auto& p : parameters)
    if (active(p, config) && !config.contains(p.name))
      throw InputError(fmt::format("knob '{}' is active but has no value", p.name));
}

std::size_t
SearchSpace::grid_size(std::size_t float_points) const {
  std::size_t total = 1;
  for (const auto& p : parameters) {
    const std::size_t n = p.grid_count(float_points);
    total = total > SIZE_MAX / n ? SIZE_MAX : total * n;
  }
  return total;
}

std::optional<nlohmann::json>
SearchSpace::defaults() const {
  nlohmann::json config = nlohmann::json::object();
  for (const auto& p : parameters) {
    if (!active(p, config))
      continue;
    if (!p.default_value)
      return std::nullopt;
    config[p.name] = *p.default_value;
  }
  return config;
}

nlohmann::json
SearchSpace::complete(nlohmann::json config) const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& p : parameters) {
    if (!active(p, out))
      continue;
    if (config.contains(p.name))
      out[p.name] = config.at(p.name);
    else if (p.default_value)
      out[p.name] = *p.default_value;
    else
      out[p.name] = p.external(p.kind == ParamKind::categorical ? 0.0 : 0.5 * (p.low + p.high));
  }
  return out;
}

SearchSpace
parse_search_space(const std::string& yaml, const std::string& source) {
  const auto doc = config::parse_yaml(yaml, source, space_schema());
  SearchSpace space;
  space.source = source;
  space.name = doc.at("name").get<std::string>();
  space.description = doc.value("description", "");
  std::set<std::string> names;
  for (const auto& p : doc.at("parameters")) {
    auto parameter = parse_parameter(p, source, space.parameters);
    if (!names.insert(parameter.name).second)
      fail(source, fmt::format("parameter '{}' is listed twice", parameter.name));
    space.parameters.push_back(std::move(parameter));
  }
  if (space.parameters.empty())
    fail(source, "'parameters' is empty: a space needs at least one knob");
  return space;
}

SearchSpace
load_search_space(const std::filesystem::path& file) {
  return parse_search_space(read_input_file(file, "a search space YAML file"), file.string());
}

SearchSpace
resolve_search_space(const std::string& name_or_path) {
  return load_search_space(resolve_bundled_yaml(name_or_path, find_data_directory().path / "profiles" / "spaces",
                                                "--space", "search space"));
}

} // namespace optkit::tune
