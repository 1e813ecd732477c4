// Whether a recipe's output can hold a model's linear layers, and what the engines users deploy
// to make of it, checked from the checkpoint's header before anything is compressed.
#pragma once

#include "compress/recipe.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace optkit::compress {

// Throws InputError naming the first linear whose shape the recipe's format cannot store: FP4
// packs whole groups of input columns (NVFP4 16, MXFP4 32). Returns one line per engine limit the
// output runs into, for the user to read before deploying it: vLLM's block-FP8 kernels need the
// input features, and the output features of the linears it fuses, in multiples of the block;
// vLLM no longer loads 2:4-sparse checkpoints.
std::vector<std::string> check_recipe_fits(const Recipe& recipe, const std::filesystem::path& model);

} // namespace optkit::compress
