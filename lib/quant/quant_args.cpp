#include "quant/quant_args.hpp"

#include "core/error.hpp"
#include "core/json_fields.hpp"

#include <array>
#include <fmt/format.h>
#include <utility>

namespace optkit::quant {

namespace {

constexpr std::array<std::pair<Strategy, std::string_view>, 4> kStrategies = {{{Strategy::tensor, "tensor"},
                                                                               {Strategy::channel, "channel"},
                                                                               {Strategy::group, "group"},
                                                                               {Strategy::token, "token"}}};

constexpr std::array<std::pair<Levels, std::string_view>, 2> kLevels = {
    {{Levels::midtread, "midtread"}, {Levels::midrise, "midrise"}}};

template <typename Enum, std::size_t N>
std::string_view
name_in(const std::array<std::pair<Enum, std::string_view>, N>& table, Enum value) {
  for (const auto& [v, name] : table)
    if (v == value)
      return name;
  return "?";
}

template <typename Enum, std::size_t N>
std::optional<Enum>
value_in(const std::array<std::pair<Enum, std::string_view>, N>& table, std::string_view name) {
  for (const auto& [v, n] : table)
    if (n == name)
      return v;
  return std::nullopt;
}

} // namespace

float
QuantArgs::qmin() const {
  return is_fp8() ? -448.0f : -static_cast<float>(1 << (bits - 1));
}

float
QuantArgs::qmax() const {
  return is_fp8() ? 448.0f : static_cast<float>((1 << (bits - 1)) - 1);
}

std::string_view
strategy_name(Strategy strategy) {
  return name_in(kStrategies, strategy);
}

std::optional<Strategy>
parse_strategy(std::string_view name) {
  return value_in(kStrategies, name);
}

std::string_view
levels_name(Levels levels) {
  return name_in(kLevels, levels);
}

std::optional<Levels>
parse_levels(std::string_view name) {
  return value_in(kLevels, name);
}

void
validate(const QuantArgs& a, bool activations, const std::string& where) {
  auto fail = [&](const std::string& why) { throw InputError(fmt::format("{}: {}", where, why)); };
  if (a.is_fp8() && a.bits != 8)
    fail(fmt::format("num_bits {} with type float: only 8-bit FP8 (E4M3) is supported", a.bits));
  if (!a.is_fp8() && (a.bits < 2 || a.bits > 8))
    fail(fmt::format("num_bits {}: integer quantization needs 2 to 8 bits", a.bits));
  if (a.strategy == Strategy::token && !a.dynamic)
    fail("strategy token needs dynamic: true (per-token scales exist only at run time)");
  if (a.strategy == Strategy::group && a.group_size <= 0)
    fail("strategy group needs group_size > 0");
  if (a.strategy != Strategy::group && a.group_size > 0)
    fail(fmt::format("group_size {} is only valid with strategy group", a.group_size));
  if (!activations && a.dynamic)
    fail("weights cannot be dynamic (their scales are computed once, when compressing)");
  if (activations && !a.dynamic)
    fail("only dynamic activation quantization is supported (static input scales need activation observers)");
  if (activations && !a.symmetric)
    fail("activation quantization must be symmetric");
  if (activations && a.strategy != Strategy::token && a.strategy != Strategy::tensor)
    fail(fmt::format("activation strategy {}: use token", strategy_name(a.strategy)));
  if (!activations && a.strategy == Strategy::token)
    fail("weights cannot use the token strategy");
  if (a.is_fp8() && !a.symmetric)
    fail("FP8 quantization is symmetric");
  if (a.levels == Levels::midrise && (activations || a.is_fp8() || !a.symmetric))
    fail("levels midrise needs symmetric integer weights");
}

nlohmann::json
to_json(const QuantArgs& a) {
  nlohmann::json j = {{"num_bits", a.bits},
                      {"type", a.is_fp8() ? "float" : "int"},
                      {"symmetric", a.symmetric},
                      {"strategy", std::string(strategy_name(a.strategy))},
                      {"dynamic", a.dynamic}};
  j["group_size"] = a.strategy == Strategy::group ? nlohmann::json(a.group_size) : nlohmann::json(nullptr);
  return j;
}

QuantArgs
quant_args_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object())
    throw InputError(fmt::format("{}: expected an object of quantization arguments", where));
  QuantArgs a;
  try {
    if (j.contains("num_bits"))
      a.bits = j.at("num_bits").get<int>();
    if (j.contains("type")) {
      const auto type = j.at("type").get<std::string>();
      if (type != "int" && type != "float")
        throw InputError(fmt::format("{}: type '{}' (expected int or float)", where, type));
      a.type = type == "float" ? NumberType::floating : NumberType::integer;
    }
    if (j.contains("symmetric"))
      a.symmetric = j.at("symmetric").get<bool>();
    if (j.contains("group_size") && !j.at("group_size").is_null())
      a.group_size = j.at("group_size").get<std::int64_t>();
    if (j.contains("dynamic"))
      a.dynamic = j.at("dynamic").is_boolean() ? j.at("dynamic").get<bool>() : true; // "local" is dynamic
    if (j.contains("strategy") && !j.at("strategy").is_null()) {
      const auto name = j.at("strategy").get<std::string>();
      const auto strategy = parse_strategy(name);
      if (!strategy)
        throw InputError(fmt::format("{}: strategy '{}' (optkit supports tensor, channel, group, token)", where, name));
      a.strategy = *strategy;
    } else {
      a.strategy = a.group_size > 0 ? Strategy::group : a.group_size == -1 ? Strategy::channel : Strategy::tensor;
    }
    if (a.group_size == -1)
      a.group_size = 0;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(describe_json_error(where, e));
  }
  return a;
}

} // namespace optkit::quant
