// Reading fields out of a parsed JSON document the user supplied. nlohmann-json signals a field
// of the wrong type, a missing key or an out-of-range number with its own exceptions; a parser
// runs its reads through read_json_fields so those become the InputError optkit promises (exit 2),
// naming the file and the field's JSON pointer (the library is built with JSON_DIAGNOSTICS).
#pragma once

#include "core/error.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

namespace optkit {

// "<source>: field /model/vocab: type must be string, but is number".
std::string describe_json_error(const std::string& source, const nlohmann::json::exception& error);

// The value among `values` whose name (its to_string) is `name`; nullopt when none is.
template <class Enum, std::size_t N>
std::optional<Enum>
enum_named(const std::string& name, const std::array<Enum, N>& values) {
  for (const Enum value : values)
    if (to_string(value) == name)
      return value;
  return std::nullopt;
}

// An enum field written by its name; otherwise nlohmann's out_of_range (406) naming the field and
// saying what it should be ("'warmup' is not a study phase"), which read_json_fields reports.
template <class Enum, std::size_t N>
Enum
json_enum(const nlohmann::json& v, const std::array<Enum, N>& values, const std::string& what) {
  if (const auto value = enum_named(v.get<std::string>(), values))
    return *value;
  throw nlohmann::json::out_of_range::create(406, "'" + v.get<std::string>() + "' is not " + what, &v);
}

// An integer field of type T. nlohmann's get<T>() casts a floating-point number straight to T,
// which is undefined behaviour outside T's range (the flow-job fuzzer found 6.5e34 read as an
// int), and wraps an integer outside it. This takes an integer in T's range, or a float with an
// integral value in it (3.0 as a user may write 3), and otherwise throws nlohmann's out_of_range
// (406) or type_error (302) naming the field, which read_json_fields turns into an InputError.
template <class T>
T
json_integer(const nlohmann::json& v) {
  static_assert(std::is_integral_v<T>);
  using Limits = std::numeric_limits<T>;
  const auto out_of_range = [&] {
    return nlohmann::json::out_of_range::create(406,
                                                "number " + v.dump() + " is not an integer from " +
                                                    std::to_string(Limits::min()) + " to " +
                                                    std::to_string(Limits::max()),
                                                &v);
  };
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(Limits::max()))
      throw out_of_range();
    return static_cast<T>(u);
  }
  if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    if ((Limits::is_signed && i < static_cast<std::int64_t>(Limits::min())) || (!Limits::is_signed && i < 0) ||
        (i > 0 && static_cast<std::uint64_t>(i) > static_cast<std::uint64_t>(Limits::max())))
      throw out_of_range();
    return static_cast<T>(i);
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    const double bound = std::ldexp(1.0, Limits::digits); // 2^31 for int: every value below fits
    if (!std::isfinite(d) || d != std::floor(d) || d >= bound || d < (Limits::is_signed ? -bound : 0.0))
      throw out_of_range();
    return static_cast<T>(d);
  }
  throw nlohmann::json::type_error::create(302, std::string("type must be number, but is ") + v.type_name(), &v);
}

template <class Read>
auto
read_json_fields(const std::string& source, Read&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const nlohmann::json::exception& error) {
    throw InputError(describe_json_error(source, error));
  }
}

} // namespace optkit
