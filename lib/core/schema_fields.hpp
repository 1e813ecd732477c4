// Shorthands for the fields schemas declare most: a bounded number and a nested object.
#pragma once

#include "core/yaml_schema.hpp"

#include <memory>
#include <string>

namespace optkit::config {

inline Field
number_field(std::string name, std::string help, double minimum, double maximum, bool required = false) {
  Field f{std::move(name), Type::number, required, std::move(help)};
  f.minimum = minimum;
  f.maximum = maximum;
  return f;
}

inline Field
object_field(std::string name, std::string help, Schema schema) {
  Field f{std::move(name), Type::object, false, std::move(help)};
  f.object = std::make_shared<const Schema>(std::move(schema));
  return f;
}

} // namespace optkit::config
