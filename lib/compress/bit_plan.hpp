// A mixed-precision plan for `optkit compress --plan`: the bits of each decoder layer, read from
// the JSON `optkit plan hetero --format json` writes (its `layer_bits`; 16 leaves a layer as it
// is), and checked against the model and the recipe it is applied to before any trial starts.
#pragma once

#include "compress/recipe.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace optkit::compress {

struct BitPlan {
  std::filesystem::path source;
  std::string sha256;
  std::vector<int> layer_bits;
};

// InputError naming the file for unreadable JSON, a missing or malformed layer_bits, or a
// bitwidth other than 2-8 or 16.
BitPlan read_bit_plan(const std::filesystem::path& file);

// InputError unless the plan has one entry per decoder layer of a model with `num_layers`,
// quantizes at least one layer, and the recipe can carry per-layer bitwidths (a weight-only
// integer model recipe targeting every linear layer, without 2:4 sparsity).
void check_bit_plan(const BitPlan& plan, const Recipe& recipe, std::int64_t num_layers,
                    const std::filesystem::path& model);

nlohmann::json to_json(const BitPlan& plan);

} // namespace optkit::compress
