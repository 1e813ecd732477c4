// A compression recipe: a YAML file (recipes/<name>.yaml, or any path) that says what to do to a
// model — the quantization scheme, the calibration it needs, which layers are touched, and the
// algorithm with its parameters. Recipes are data, never code.
#pragma once

#include "compress/gguf_mixture.hpp"
#include "quant/awq.hpp"
#include "quant/compressed_tensors.hpp"
#include "quant/quant_args.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace optkit::compress {

enum class Method { rtn, gptq };
enum class Sampler { uniform, length, stratified };
enum class Lossless { none, zstd };

struct CalibrationNeeds {
  std::int64_t samples = 128;
  std::int64_t sequence_length = 512;
  Sampler sampler = Sampler::uniform;
};

struct Recipe {
  std::string name, description;
  std::filesystem::path source;
  bool delta = false; // a delta recipe (compress delta), else a model recipe
  quant::QuantArgs weights;
  std::optional<quant::QuantArgs> input_activations;
  std::vector<std::string> targets = {"Linear"};
  std::vector<std::string> ignore = {"lm_head"};
  Method method = Method::gptq;
  std::int64_t block_size = 128;
  double dampening = 0.01;
  bool act_order = true; // "static": activation order, original groups (no g_idx)
  bool sparse_2_4 = false;
  std::optional<double> smoothquant_alpha;
  std::optional<quant::AwqOptions> awq; // AWQ's scale search before quantizing (weight-only)
  // An FP8 KV cache: K and V scales calibrated per tensor or per KV head (kv_cache_scheme).
  std::optional<quant::KvScaleStrategy> kv_cache;
  Lossless lossless = Lossless::none;
  // A GGUF recipe: llama.cpp's k-quant file type (compress/gguf_export.hpp) instead of a
  // compressed-tensors scheme; its calibration, when --calib is given, is the importance matrix.
  std::optional<GgufFileType> gguf;
  CalibrationNeeds calibration;
  nlohmann::json document; // the validated YAML as JSON (archived, saved beside the output)
  // Bits per decoder layer from a mixed-precision plan (compress --plan; 16 leaves a layer as it
  // is); empty: the recipe's weights everywhere.
  std::vector<int> layer_bits;

  // GPTQ, SmoothQuant, AWQ, NVFP4 activations' global scale and KV-cache scales (their largest
  // |x|) learn from data.
  bool needs_calibration() const {
    return method == Method::gptq || smoothquant_alpha.has_value() || awq.has_value() || kv_cache.has_value() ||
           (input_activations && input_activations->has_global_scale());
  }
  // GPTQ, SmoothQuant and AWQ weigh errors or pick factors by the inputs' second moments.
  bool needs_hessians() const { return method == Method::gptq || smoothquant_alpha.has_value() || awq.has_value(); }
  // The weight arguments of decoder layer `layer` (the recipe's, with the plan's bits), nullopt
  // when the plan leaves the layer unquantized.
  std::optional<quant::QuantArgs> layer_weights(std::int64_t layer) const;
};

std::string_view sampler_name(Sampler sampler);

// A name from the bundled recipes/ directory, or a path to a YAML file.
Recipe load_recipe(const std::string& name_or_path);
Recipe load_recipe_file(const std::filesystem::path& file);
// Names (file stems) of the bundled recipes, sorted.
std::vector<std::string> bundled_recipe_names();
// One line per field of the recipe schema, for --list-recipes and the man page.
std::string recipe_schema_help();

} // namespace optkit::compress
