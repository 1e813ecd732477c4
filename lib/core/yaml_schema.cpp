#include "core/yaml_schema.hpp"

#include "core/error.hpp"
#include "core/text.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

namespace optkit::config {
namespace {

class Validator {
public:
  explicit Validator(std::string source) : m_source(std::move(source)) {}

  nlohmann::json document(const YAML::Node& root, const Schema& schema) {
    if (!root.IsDefined() || root.IsNull()) {
      return object(YAML::Node(YAML::NodeType::Map), schema, "", root.Mark());
    }
    return object(root, schema, "", root.Mark());
  }

private:
  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& message) const {
    if (mark.is_null()) {
      throw InputError(fmt::format("{}: {}", m_source, message));
    }
    throw InputError(fmt::format("{}:{}:{}: {}", m_source, mark.line + 1, mark.column + 1, message));
  }

  static std::string child_path(const std::string& parent, const std::string& key) {
    return parent.empty() ? key : parent + "." + key;
  }

  nlohmann::json object(const YAML::Node& node, const Schema& schema, const std::string& path, const YAML::Mark& mark) {
    if (!node.IsMap()) {
      fail(node.Mark().is_null() ? mark : node.Mark(),
           fmt::format("{} must be a mapping of keys to values", path.empty() ? schema.name : "'" + path + "'"));
    }
    std::vector<std::string> known;
    for (const auto& field : schema.fields) {
      known.push_back(field.name);
    }
    nlohmann::json out = nlohmann::json::object();
    std::set<std::string> seen;
    for (const auto& entry : node) {
      const YAML::Node& key_node = entry.first;
      if (!key_node.IsScalar()) {
        fail(key_node.Mark(), "keys must be plain strings");
      }
      const std::string key = key_node.Scalar();
      const std::string where = child_path(path, key);
      if (!seen.insert(key).second) {
        fail(key_node.Mark(), fmt::format("duplicate key '{}'; keep one of them", where));
      }
      const auto field =
          std::find_if(schema.fields.begin(), schema.fields.end(), [&](const Field& f) { return f.name == key; });
      if (field == schema.fields.end()) {
        const auto suggestion = closest_match(key, known);
        fail(key_node.Mark(),
             suggestion ? fmt::format("unknown key '{}'; did you mean '{}'?", where, child_path(path, *suggestion))
                        : fmt::format("unknown key '{}'; valid keys here: {}", where, join(known, ", ")));
      }
      out[key] = value(entry.second, *field, where, key_node.Mark());
    }
    for (const auto& field : schema.fields) {
      if (field.required && !seen.contains(field.name)) {
        fail(node.Mark().is_null() ? mark : node.Mark(),
             fmt::format("missing required key '{}' ({})", child_path(path, field.name), field.help));
      }
    }
    return out;
  }

  nlohmann::json value(const YAML::Node& node, const Field& field, const std::string& path,
                       const YAML::Mark& key_mark) {
    const YAML::Mark mark = node.Mark().is_null() ? key_mark : node.Mark();
    if (node.IsNull()) {
      fail(key_mark, fmt::format("'{}' has no value; expected {}", path, type_name(field.type)));
    }
    switch (field.type) {
    case Type::object:
      return object(node, *field.object, path, mark);
    case Type::list: {
      if (!node.IsSequence()) {
        fail(mark, fmt::format("'{}' must be a list ({})", path, field.help));
      }
      nlohmann::json items = nlohmann::json::array();
      std::size_t index = 0;
      for (const auto& element : node) {
        items.push_back(value(element, *field.item, fmt::format("{}[{}]", path, index++), mark));
      }
      return items;
    }
    default:
      break;
    }
    if (!node.IsScalar()) {
      fail(mark,
           fmt::format("'{}' must be {}, not a {}", path, type_name(field.type), node.IsMap() ? "mapping" : "list"));
    }
    return scalar(node.Scalar(), field, path, mark);
  }

  nlohmann::json scalar(const std::string& text, const Field& field, const std::string& path, const YAML::Mark& mark) {
    const auto wrong_type = [&]() -> void {
      fail(mark, fmt::format("'{}' must be {}, got '{}'", path, type_name(field.type), text));
    };
    switch (field.type) {
    case Type::string:
      if (!field.choices.empty() &&
          std::find(field.choices.begin(), field.choices.end(), text) == field.choices.end()) {
        const auto suggestion = closest_match(text, field.choices);
        fail(mark, fmt::format("'{}' is '{}'; expected one of {}{}", path, text, join(field.choices, ", "),
                               suggestion ? fmt::format(" (did you mean '{}'?)", *suggestion) : ""));
      }
      return text;
    case Type::boolean:
      if (text == "true" || text == "True" || text == "TRUE") {
        return true;
      }
      if (text == "false" || text == "False" || text == "FALSE") {
        return false;
      }
      wrong_type();
      break;
    case Type::integer: {
      long long parsed = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
      if (ec != std::errc() || end != text.data() + text.size()) {
        wrong_type();
      }
      check_bounds(static_cast<double>(parsed), field, path, mark);
      return parsed;
    }
    case Type::number: {
      double parsed = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
      if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(parsed)) {
        wrong_type();
      }
      check_bounds(parsed, field, path, mark);
      return parsed;
    }
    default:
      break;
    }
    wrong_type();
    return nullptr;
  }

  void check_bounds(double v, const Field& field, const std::string& path, const YAML::Mark& mark) const {
    if ((field.minimum && v < *field.minimum) || (field.maximum && v > *field.maximum)) {
      fail(mark, fmt::format("'{}' is {}; it must be in [{}, {}]", path, v,
                             field.minimum ? fmt::format("{}", *field.minimum) : "-inf",
                             field.maximum ? fmt::format("{}", *field.maximum) : "inf"));
    }
  }

  std::string m_source;
};

} // namespace

std::string
type_name(Type type) {
  switch (type) {
  case Type::string:
    return "a string";
  case Type::integer:
    return "an integer";
  case Type::number:
    return "a number";
  case Type::boolean:
    return "true or false";
  case Type::list:
    return "a list";
  case Type::object:
    return "a mapping";
  }
  return "a value";
}

nlohmann::json
parse_yaml(const std::string& text, const std::string& source, const Schema& schema) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) {
      throw InputError(fmt::format("{}: malformed YAML: {}", source, e.msg));
    }
    throw InputError(fmt::format("{}:{}:{}: malformed YAML: {}", source, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  try {
    return Validator(source).document(root, schema);
  } catch (const YAML::Exception& e) {
    // yaml-cpp raises on conversions of malformed nodes; keep the one-line, located form.
    throw InputError(fmt::format("{}:{}:{}: {}", source, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
}

nlohmann::json
load_yaml_file(const std::filesystem::path& file, const Schema& schema, std::size_t max_bytes) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  if (ec) {
    throw InputError(fmt::format("{}: cannot read: {}", file.string(), ec.message()));
  }
  if (size > max_bytes) {
    throw InputError(fmt::format("{}: {} is larger than the {} allowed for a {} file", file.string(),
                                 format_bytes(size), format_bytes(max_bytes), schema.name));
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw InputError(fmt::format("{}: cannot read: {}", file.string(), errno_text(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_yaml(text.str(), file.string(), schema);
}

} // namespace optkit::config
