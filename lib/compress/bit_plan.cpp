#include "compress/bit_plan.hpp"

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/sha256.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace optkit::compress {

BitPlan
read_bit_plan(const std::filesystem::path& file) {
  const auto doc = read_json_file(file, "--plan takes the JSON of optkit plan hetero --format json");
  const auto where = fmt::format("--plan {}", file.string());
  if (!doc.is_object() || !doc.contains("layer_bits") || !doc.at("layer_bits").is_array() ||
      doc.at("layer_bits").empty())
    throw InputError(
        fmt::format("{}: no layer_bits list (write the plan with optkit plan hetero --format json)", where));
  BitPlan plan;
  plan.source = file;
  plan.sha256 = digest_file(file).sha256;
  std::size_t index = 0;
  for (const auto& value : doc.at("layer_bits")) {
    if (!value.is_number_integer())
      throw InputError(fmt::format("{}: layer_bits[{}] is {}, not an integer bitwidth", where, index, value.dump()));
    const auto bits = value.get<std::int64_t>();
    if (!((bits >= 2 && bits <= 8) || bits == 16))
      throw InputError(
          fmt::format("{}: layer_bits[{}] is {}; bitwidths are 2-8 (integer) or 16 (left as is)", where, index, bits));
    plan.layer_bits.push_back(static_cast<int>(bits));
    ++index;
  }
  return plan;
}

void
check_bit_plan(const BitPlan& plan, const Recipe& recipe, std::int64_t num_layers, const std::filesystem::path& model) {
  const auto where = fmt::format("--plan {}", plan.source.string());
  if (static_cast<std::int64_t>(plan.layer_bits.size()) != num_layers)
    throw InputError(fmt::format("{}: the plan has bits for {} layers but {} has {} (plan this model: optkit plan "
                                 "hetero --model {})",
                                 where, plan.layer_bits.size(), model.string(), num_layers, model.string()));
  if (std::all_of(plan.layer_bits.begin(), plan.layer_bits.end(), [](int b) { return b >= 16; }))
    throw InputError(fmt::format("{}: every layer is 16-bit, so there is nothing to compress", where));
  const bool weight_only_int = !recipe.weights.is_float() && !recipe.input_activations;
  if (recipe.delta || !weight_only_int || recipe.sparse_2_4)
    throw InputError(fmt::format("{} needs a weight-only integer recipe (w4a16_rtn, int_w4a16 or your own): --recipe "
                                 "{} {}",
                                 where, recipe.name,
                                 recipe.delta                ? "is a delta recipe"
                                 : recipe.sparse_2_4         ? "prunes 2:4"
                                 : recipe.weights.is_float() ? "quantizes to floats"
                                                             : "quantizes activations"));
  // The plan's groups target whole layers: a recipe that compresses only some linear layers
  // would leave modules its config claims are quantized.
  if (recipe.targets != std::vector<std::string>{"Linear"})
    throw InputError(fmt::format("{}: --recipe {} targets only some layers; a plan sets the bits of every linear "
                                 "layer, so use a recipe with layers.targets [Linear]",
                                 where, recipe.name));
}

nlohmann::json
to_json(const BitPlan& plan) {
  return {{"file", plan.source.string()}, {"sha256", plan.sha256}, {"layer_bits", plan.layer_bits}};
}

} // namespace optkit::compress
