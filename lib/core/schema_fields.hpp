// Shorthands for the fields schemas declare most: a bounded number, a nested object, a list and
// bounds on any field.
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
object_field(std::string name, std::string help, Schema schema, bool required = false) {
  Field f{std::move(name), Type::object, required, std::move(help)};
  f.object = std::make_shared<const Schema>(std::move(schema));
  return f;
}

inline Field
list_field(std::string name, std::string help, Field item, bool required = false) {
  Field f{std::move(name), Type::list, required, std::move(help)};
  f.item = std::make_shared<const Field>(std::move(item));
  return f;
}

inline Field
bounded(Field field, double minimum, double maximum) {
  field.minimum = minimum;
  field.maximum = maximum;
  return field;
}

} // namespace optkit::config
