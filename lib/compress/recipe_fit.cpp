#include "compress/recipe_fit.hpp"

#include "compress/layerwise.hpp"
#include "core/error.hpp"
#include "model/model_config.hpp"
#include "model/weight_store.hpp"
#include "runtime/decoder_pass.hpp"

#include <fmt/format.h>

namespace optkit::compress {

namespace {

// A compressed linear's name and [out, in], as the checkpoint stores it, and whether vLLM fuses it
// with the others reading its input (q/k/v, gate/up).
struct LinearShape {
  std::string module;
  std::int64_t rows, cols;
  bool fused;
};

std::vector<LinearShape>
compressed_linear_shapes(const Recipe& recipe, const std::filesystem::path& model) {
  const auto config = model::load_model_config(model);
  const model::WeightStore store(model);
  std::vector<LinearShape> out;
  for (std::int64_t layer = 0; layer < config.num_layers; ++layer)
    for (const auto& linear : runtime::layer_linears(config, layer)) {
      const auto module = fmt::format("model.layers.{}.{}", layer, linear.name);
      if (!compressed_weight_args(recipe, layer, module))
        continue;
      const auto shape = store.require(module + ".weight").shape();
      const bool fused =
          linear.input == runtime::LinearInput::attention_in || linear.input == runtime::LinearInput::mlp_in;
      out.push_back({module, shape.at(0), shape.at(1), fused});
    }
  return out;
}

void
check_fp4_groups(const Recipe& recipe, const std::vector<LinearShape>& linears) {
  const auto group = recipe.weights.group_size;
  for (const auto& l : linears)
    if (l.cols % group != 0)
      throw InputError(fmt::format("{}: {} input features are not a whole number of {}'s groups of {} (FP4 values "
                                   "are packed by group); add it to the recipe's layers.ignore, or use another "
                                   "recipe",
                                   l.module, l.cols, recipe.weights.has_power_of_two_scales() ? "MXFP4" : "NVFP4",
                                   group));
}

// The first linear vLLM's block-FP8 kernels refuse, if any: every linear's input features, and
// the output features of the ones it fuses (q/k/v, gate/up), are whole blocks there.
std::optional<std::string>
block_fp8_misfit(const Recipe& recipe, const std::vector<LinearShape>& linears) {
  const auto rows = recipe.weights.block_rows, cols = recipe.weights.block_cols;
  for (const auto& l : linears)
    if (l.cols % cols != 0 || (l.fused && l.rows % rows != 0))
      return fmt::format("{} is [{}, {}]", l.module, l.rows, l.cols);
  return std::nullopt;
}

} // namespace

std::vector<std::string>
check_recipe_fits(const Recipe& recipe, const std::filesystem::path& model) {
  if (recipe.delta) // optkit's own delta format: serve-deltas runs it
    return {};
  std::vector<std::string> notes;
  if (recipe.sparse_2_4)
    notes.push_back(fmt::format("--recipe {}: vLLM no longer loads 2:4-sparse checkpoints (its 2:4 kernels were "
                                "removed in 0.15); optkit's runtime runs this output",
                                recipe.name));
  const auto linears = compressed_linear_shapes(recipe, model);
  if (recipe.weights.is_fp4())
    check_fp4_groups(recipe, linears);
  if (recipe.weights.strategy == quant::Strategy::block)
    if (const auto misfit = block_fp8_misfit(recipe, linears))
      notes.push_back(fmt::format("--recipe {}: vLLM's block-FP8 kernels need whole {}x{} blocks and {}: vLLM will "
                                  "refuse this output (optkit's runtime runs it; compressed-tensors pads the last "
                                  "block)",
                                  recipe.name, recipe.weights.block_rows, recipe.weights.block_cols, *misfit));
  return notes;
}

} // namespace optkit::compress
