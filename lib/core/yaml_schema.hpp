// YAML documents validated against a declared schema. Every error is an InputError (exit 2)
// that starts with `file:line:col:` and says what to change; unknown keys name the closest valid
// key. A validated document comes back as JSON so it can be archived as resolved config.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace optkit::config {

enum class Type { string, integer, number, boolean, list, object };

struct Schema;

struct Field {
  std::string name;
  Type type = Type::string;
  bool required = false;
  std::string help;                 // one line, used in messages and docs
  std::vector<std::string> choices; // allowed values of a string field (empty: any)
  std::optional<double> minimum;    // numeric bounds, inclusive
  std::optional<double> maximum;
  std::shared_ptr<const Schema> object; // the nested schema of an object field
  std::shared_ptr<const Field> item;    // the element of a list field
};

struct Schema {
  std::string name; // "user config", "recipe", ... for messages
  std::vector<Field> fields;
};

// Parses `text` (named `source` in messages) and validates it against `schema`.
nlohmann::json parse_yaml(const std::string& text, const std::string& source, const Schema& schema);

// Reads and validates a file. Files larger than `max_bytes` are rejected before parsing.
nlohmann::json load_yaml_file(const std::filesystem::path& file, const Schema& schema,
                              std::size_t max_bytes = 4u << 20);

std::string type_name(Type type);

} // namespace optkit::config
