#include "quant/quant_args.hpp"

#include "core/error.hpp"
#include "core/json_fields.hpp"

#include <array>
#include <fmt/format.h>
#include <functional>
#include <utility>

namespace optkit::quant {

namespace {

// A whole number from the user's JSON. nlohmann's get<integer>() casts a floating-point value
// (1.5, or 1e127 from an integer too long for 64 bits), which truncates or is undefined.
std::int64_t
integer_value(const nlohmann::json& v, const char* field, const std::string& where) {
  if (!v.is_number_integer())
    throw InputError(fmt::format("{}: {} {} (expected an integer)", where, field, v.dump()));
  return v.get<std::int64_t>();
}

constexpr std::array<std::pair<Strategy, std::string_view>, 6> kStrategies = {{{Strategy::tensor, "tensor"},
                                                                               {Strategy::channel, "channel"},
                                                                               {Strategy::group, "group"},
                                                                               {Strategy::block, "block"},
                                                                               {Strategy::tensor_group, "tensor_group"},
                                                                               {Strategy::token, "token"}}};

// The largest finite values of the float grids.
constexpr float kFp8Max = 448.0f;
constexpr float kFp4Max = 6.0f;

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

// [rows, cols], or compressed-tensors' older "RxC" string.
void
read_block_structure(const nlohmann::json& j, QuantArgs& a, const std::string& where) {
  std::vector<std::int64_t> sizes;
  if (j.is_string()) {
    const auto text = j.get<std::string>();
    const auto x = text.find('x');
    try {
      if (x != std::string::npos)
        sizes = {std::stoll(text.substr(0, x)), std::stoll(text.substr(x + 1))};
    } catch (const std::exception&) {
      sizes.clear();
    }
  } else if (j.is_array()) {
    for (const auto& size : j)
      sizes.push_back(integer_value(size, "block_structure entry", where));
  }
  if (sizes.size() != 2 || sizes[0] <= 0 || sizes[1] <= 0 || sizes[0] > (1 << 20) || sizes[1] > (1 << 20))
    throw InputError(fmt::format("{}: block_structure {} (expected [rows, cols] such as [128, 128])", where, j.dump()));
  a.block_rows = sizes[0];
  a.block_cols = sizes[1];
}

bool
grouped(Strategy strategy) {
  return strategy == Strategy::group || strategy == Strategy::tensor_group;
}

// The float grids optkit runs: FP8 E4M3 anywhere; FP4 E2M1 as NVFP4 (tensor_group of 16) or
// MXFP4 weights (group of 32).
void
validate_float(const QuantArgs& a, bool activations, const std::function<void(const std::string&)>& fail) {
  if (a.bits != 8 && a.bits != 4)
    fail(fmt::format("num_bits {} with type float: FP8 (E4M3, 8 bits) or FP4 (E2M1, 4 bits)", a.bits));
  if (!a.symmetric)
    fail(fmt::format("FP{} quantization is symmetric", a.bits));
  if (a.strategy == Strategy::tensor_group && !(a.is_fp4() && a.group_size == 16))
    fail("strategy tensor_group is NVFP4: num_bits 4, type float, group_size 16");
  if (a.is_fp4() && a.strategy != Strategy::tensor_group &&
      !(a.strategy == Strategy::group && a.group_size == 32 && !activations))
    fail(activations ? "FP4 activations are NVFP4: strategy tensor_group, group_size 16, dynamic local"
                     : "FP4 weights are NVFP4 (strategy tensor_group, group_size 16) or MXFP4 (strategy group, "
                       "group_size 32)");
  if (!activations && a.is_fp8() && a.strategy == Strategy::group)
    fail("FP8 weights use strategy tensor, channel or block");
  if (a.strategy == Strategy::block && !a.is_fp8())
    fail("strategy block is FP8 block quantization: num_bits 8, type float");
}

} // namespace

float
QuantArgs::qmin() const {
  return is_float() ? -qmax() : -static_cast<float>(1 << (bits - 1));
}

float
QuantArgs::qmax() const {
  if (is_float())
    return bits == 4 ? kFp4Max : kFp8Max;
  return static_cast<float>((1 << (bits - 1)) - 1);
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
  if (a.is_float())
    validate_float(a, activations, fail);
  if (!a.is_float() && (a.bits < 2 || a.bits > 8))
    fail(fmt::format("num_bits {}: integer quantization needs 2 to 8 bits", a.bits));
  if (!a.is_float() && (a.strategy == Strategy::tensor_group || a.strategy == Strategy::block))
    fail(fmt::format("strategy {} needs float (FP4 or FP8) values", strategy_name(a.strategy)));
  if (a.strategy == Strategy::token && !a.dynamic)
    fail("strategy token needs dynamic: true (per-token scales exist only at run time)");
  if (grouped(a.strategy) && a.group_size <= 0)
    fail(fmt::format("strategy {} needs group_size > 0", strategy_name(a.strategy)));
  if (!grouped(a.strategy) && a.group_size > 0)
    fail(fmt::format("group_size {} is only valid with strategy group or tensor_group", a.group_size));
  if (a.strategy == Strategy::block && (a.block_rows <= 0 || a.block_cols <= 0))
    fail("strategy block needs block_structure [rows, cols] of positive sizes");
  if (a.strategy != Strategy::block && (a.block_rows > 0 || a.block_cols > 0))
    fail("block_structure is only valid with strategy block");
  if (!activations && a.dynamic)
    fail("weights cannot be dynamic (their scales are computed once, when compressing)");
  if (activations && !a.dynamic)
    fail("only dynamic activation quantization is supported (static input scales need activation observers)");
  if (a.dynamic_local && (!activations || a.strategy != Strategy::tensor_group))
    fail("dynamic local is for activations with strategy tensor_group (NVFP4)");
  if (activations && a.strategy == Strategy::tensor_group && !a.dynamic_local)
    fail("NVFP4 activations are dynamic: local (group scales per call, under a calibrated global scale)");
  if (activations && !a.symmetric)
    fail("activation quantization must be symmetric");
  if (activations && a.strategy != Strategy::token && a.strategy != Strategy::tensor && !grouped(a.strategy))
    fail(fmt::format("activation strategy {}: use token, tensor, group or tensor_group", strategy_name(a.strategy)));
  if (!activations && a.strategy == Strategy::token)
    fail("weights cannot use the token strategy");
  if (a.levels == Levels::midrise && (activations || a.is_float() || !a.symmetric))
    fail("levels midrise needs symmetric integer weights");
}

nlohmann::json
to_json(const QuantArgs& a) {
  nlohmann::json j = {{"num_bits", a.bits},
                      {"type", a.is_float() ? "float" : "int"},
                      {"symmetric", a.symmetric},
                      {"strategy", std::string(strategy_name(a.strategy))},
                      {"dynamic", a.dynamic_local ? nlohmann::json("local") : nlohmann::json(a.dynamic)}};
  j["group_size"] = grouped(a.strategy) ? nlohmann::json(a.group_size) : nlohmann::json(nullptr);
  if (a.strategy == Strategy::block)
    j["block_structure"] = {a.block_rows, a.block_cols};
  return j;
}

QuantArgs
quant_args_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object())
    throw InputError(fmt::format("{}: expected an object of quantization arguments", where));
  QuantArgs a;
  try {
    if (j.contains("num_bits")) {
      const auto bits = integer_value(j.at("num_bits"), "num_bits", where);
      if (bits < 1 || bits > 64)
        throw InputError(fmt::format("{}: num_bits {} (expected 2 to 8 for int, 4 or 8 for float)", where, bits));
      a.bits = static_cast<int>(bits);
    }
    if (j.contains("type")) {
      const auto type = j.at("type").get<std::string>();
      if (type != "int" && type != "float")
        throw InputError(fmt::format("{}: type '{}' (expected int or float)", where, type));
      a.type = type == "float" ? NumberType::floating : NumberType::integer;
    }
    if (j.contains("symmetric"))
      a.symmetric = j.at("symmetric").get<bool>();
    if (j.contains("group_size") && !j.at("group_size").is_null())
      a.group_size = integer_value(j.at("group_size"), "group_size", where);
    if (j.contains("dynamic")) {
      const auto& dynamic = j.at("dynamic");
      if (dynamic.is_string() && dynamic.get<std::string>() != "local")
        throw InputError(
            fmt::format("{}: dynamic '{}' (expected true, false or \"local\")", where, dynamic.get<std::string>()));
      a.dynamic_local = dynamic.is_string();
      a.dynamic = a.dynamic_local || dynamic.get<bool>();
    }
    if (j.contains("block_structure") && !j.at("block_structure").is_null())
      read_block_structure(j.at("block_structure"), a, where);
    if (j.contains("strategy") && !j.at("strategy").is_null()) {
      const auto name = j.at("strategy").get<std::string>();
      const auto strategy = parse_strategy(name);
      if (!strategy)
        throw InputError(fmt::format(
            "{}: strategy '{}' (optkit supports tensor, channel, group, block, tensor_group, token)", where, name));
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
