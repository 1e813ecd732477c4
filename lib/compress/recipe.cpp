#include "compress/recipe.hpp"

#include "compress/gguf_mixture.hpp"
#include "core/error.hpp"
#include "core/resource_paths.hpp"
#include "core/schema_fields.hpp"
#include "core/text.hpp"
#include "core/yaml_schema.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <memory>

namespace optkit::compress {

namespace {

using config::bounded;
using config::Field;
using config::object_field;
using config::Schema;
using config::Type;

Field
field(std::string name, Type type, std::string help, std::vector<std::string> choices = {}) {
  Field f{std::move(name), type, false, std::move(help)};
  f.choices = std::move(choices);
  return f;
}

Field
bounded_field(std::string name, Type type, std::string help, double minimum, double maximum) {
  return bounded(field(std::move(name), type, std::move(help)), minimum, maximum);
}

Field
string_list(std::string name, std::string help) {
  Field f{std::move(name), Type::list, false, std::move(help)};
  f.item = std::make_shared<const Field>(Field{"name", Type::string, true, "a module name, class name or re:<regex>"});
  return f;
}

Field
integer_list(std::string name, std::string help) {
  Field f{std::move(name), Type::list, false, std::move(help)};
  f.item = std::make_shared<const Field>(Field{"size", Type::integer, true, "a positive size"});
  return f;
}

Schema
quant_args_schema(const std::string& name) {
  return Schema{
      name,
      {bounded_field("num_bits", Type::integer, "bits per value (2-8 int; 8 FP8 E4M3 or 4 FP4 E2M1 float)", 2, 8),
       field("type", Type::string, "int or float (FP8 E4M3, FP4 E2M1)", {"int", "float"}),
       field("symmetric", Type::boolean, "symmetric grid (zero point 0)"),
       field("strategy", Type::string,
             "which values share a scale (block: FP8 tiles; tensor_group: NVFP4 groups under a global scale)",
             {"tensor", "channel", "group", "block", "tensor_group", "token"}),
       bounded_field("group_size", Type::integer, "input columns per scale (strategy group, tensor_group)", 1, 1 << 20),
       integer_list("block_structure", "[rows, cols] of a block (strategy block), e.g. [128, 128]"),
       field("dynamic", Type::string,
             "scales computed at run time (activations); local: per group under a calibrated global "
             "scale (NVFP4)",
             {"true", "false", "local", "True", "False", "TRUE", "FALSE"}),
       field("levels", Type::string,
             "midtread (q·s, zero representable; what vLLM loads) or midrise ((q+½)·s, no zero level; "
             "delta recipes)",
             {"midtread", "midrise"})}};
}

const Schema&
recipe_schema() {
  static const Schema schema = [] {
    Schema scheme{"scheme",
                  {object_field("weights", "how weights are quantized", quant_args_schema("weights"), true),
                   object_field("input_activations", "dynamic activation quantization at run time",
                                quant_args_schema("input_activations"))}};
    Schema calibration{
        "calibration",
        {bounded_field("samples", Type::integer, "calibration samples per trial", 1, 1e6),
         bounded_field("sequence_length", Type::integer, "tokens per sample (longer ones are cut)", 8, 1e6),
         field("sampler", Type::string, "how samples are drawn", {"uniform", "length", "stratified"})}};
    Schema layers{"layers",
                  {string_list("targets", "modules to compress (Linear = every decoder linear layer)"),
                   string_list("ignore", "modules left as they are (exact HF names or re:<regex>)")}};
    Schema algorithm{
        "algorithm",
        {field("method", Type::string, "rtn (round to nearest) or gptq (Hessian-aware)", {"rtn", "gptq"}),
         bounded_field("block_size", Type::integer, "GPTQ columns per lazy batch update", 4, 1 << 16),
         bounded_field("dampening", Type::number, "fraction of mean(diag H) added to the diagonal", 0, 10),
         field("actorder", Type::string, "column order: static (by activation) or none", {"static", "none"}),
         field("sparsity", Type::string, "SparseGPT structured pruning", {"none", "2:4"})}};
    Schema smoothquant{"smoothquant",
                       {bounded_field("alpha", Type::number, "migration strength α (0.5 OPT, 0.8-0.85 Llama)", 0, 1)}};
    Schema kv_cache{"kv_cache",
                    {field("strategy", Type::string, "one scale per tensor or per KV head (default tensor)",
                           {"tensor", "attn_head"})}};
    Schema gguf{"gguf",
                {Field{"file_type", Type::string, true, "llama.cpp's file type (llama-quantize's name)",
                       gguf_file_type_names()}}};
    Schema awq{
        "awq",
        {bounded_field("grid", Type::integer, "candidate ratios searched per input (llm-compressor's n_grid: 20)", 2,
                       1000),
         field("duo_scaling", Type::boolean, "weight magnitudes enter the factors (default true)"),
         field("clip", Type::boolean,
               "then search each group's clipping bound on its output error (llm-awq's auto_clip; default false)")}};
    return Schema{
        "recipe",
        {Field{"name", Type::string, true, "recipe name"},
         Field{"description", Type::string, true, "one line for people"},
         field("mode", Type::string, "model (compress a model) or delta (compress delta)", {"model", "delta"}),
         object_field("scheme", "quantization scheme (compressed-tensors QuantizationArgs); a recipe has this or gguf",
                      scheme),
         object_field("gguf", "a GGUF file of llama.cpp's k-quant mixtures instead of a compressed-tensors scheme",
                      gguf),
         object_field("calibration", "calibration data the recipe needs", calibration),
         object_field("layers", "which layers are compressed", layers),
         object_field("algorithm", "the compression algorithm", algorithm),
         object_field("smoothquant", "SmoothQuant before quantizing (W8A8)", smoothquant),
         object_field("awq", "AWQ's activation-aware scale search before quantizing (weight-only)", awq),
         object_field("kv_cache", "an FP8 KV cache with calibrated K and V scales (kv_cache_scheme)", kv_cache),
         field("lossless", Type::string, "lossless stage of a delta artifact", {"none", "zstd"})}};
  }();
  return schema;
}

quant::QuantArgs
args_from(nlohmann::json j, const std::string& where) {
  if (j.contains("dynamic") && j.at("dynamic") != "local") // the schema reads it as text: a YAML boolean or local
    j["dynamic"] = j.at("dynamic") == "true" || j.at("dynamic") == "True" || j.at("dynamic") == "TRUE";
  auto a = quant::quant_args_from_json(j, where);
  if (j.contains("strategy") && j.at("strategy") == "channel")
    a.group_size = 0;
  if (j.contains("levels"))
    a.levels = *quant::parse_levels(j.at("levels").get<std::string>()); // the schema checked the choice
  return a;
}

CalibrationNeeds
calibration_from(const nlohmann::json& doc) {
  CalibrationNeeds needs;
  if (!doc.contains("calibration"))
    return needs;
  const auto& c = doc.at("calibration");
  needs.samples = c.value("samples", needs.samples);
  needs.sequence_length = c.value("sequence_length", needs.sequence_length);
  const auto sampler = c.value("sampler", "uniform");
  needs.sampler = sampler == "length"       ? Sampler::length
                  : sampler == "stratified" ? Sampler::stratified
                                            : Sampler::uniform;
  return needs;
}

// A GGUF recipe names a file type and, optionally, the calibration its importance matrix uses;
// nothing of the compressed-tensors pipeline applies to it.
void
read_gguf_recipe(const nlohmann::json& doc, const std::string& where, Recipe& r) {
  for (const char* key : {"layers", "algorithm", "smoothquant", "awq", "kv_cache", "lossless"})
    if (doc.contains(key))
      throw InputError(fmt::format("{}: {} does not apply to a gguf recipe (llama.cpp's mixture decides each "
                                   "tensor's type)",
                                   where, key));
  if (r.delta)
    throw InputError(fmt::format("{}: a gguf recipe compresses whole models (mode: model)", where));
  r.gguf = model::parse_gguf_file_type(doc.at("gguf").at("file_type").get<std::string>()); // the schema checked it
  r.method = Method::rtn;
  r.targets.clear();
  r.calibration = calibration_from(doc);
}

std::filesystem::path
recipes_directory() {
  return find_data_directory().path / "recipes";
}

} // namespace

std::string_view
sampler_name(Sampler sampler) {
  switch (sampler) {
  case Sampler::uniform:
    return "uniform";
  case Sampler::length:
    return "length";
  case Sampler::stratified:
    return "stratified";
  }
  return "?";
}

Recipe
load_recipe_file(const std::filesystem::path& file) {
  const auto doc = config::load_yaml_file(file, recipe_schema());
  const auto where = file.string();
  Recipe r;
  r.source = file;
  r.document = doc;
  r.name = doc.at("name").get<std::string>();
  r.description = doc.at("description").get<std::string>();
  r.delta = doc.value("mode", "model") == "delta";
  if (doc.contains("gguf") == doc.contains("scheme"))
    throw InputError(
        fmt::format("{}: a recipe has either scheme (compressed-tensors) or gguf (a GGUF file type)", where));
  if (doc.contains("gguf")) {
    read_gguf_recipe(doc, where, r);
    return r;
  }
  const auto& scheme = doc.at("scheme");
  r.weights = args_from(scheme.at("weights"), where + ": scheme.weights");
  quant::validate(r.weights, false, where + ": scheme.weights");
  if (scheme.contains("input_activations")) {
    r.input_activations = args_from(scheme.at("input_activations"), where + ": scheme.input_activations");
    quant::validate(*r.input_activations, true, where + ": scheme.input_activations");
  }
  if (doc.contains("layers")) {
    const auto& layers = doc.at("layers");
    if (layers.contains("targets"))
      r.targets = layers.at("targets").get<std::vector<std::string>>();
    if (layers.contains("ignore"))
      r.ignore = layers.at("ignore").get<std::vector<std::string>>();
  }
  if (doc.contains("algorithm")) {
    const auto& a = doc.at("algorithm");
    r.method = a.value("method", "gptq") == "rtn" ? Method::rtn : Method::gptq;
    r.block_size = a.value("block_size", r.block_size);
    r.dampening = a.value("dampening", r.dampening);
    r.act_order = a.value("actorder", "static") == "static";
    r.sparse_2_4 = a.value("sparsity", "none") == "2:4";
  }
  if (doc.contains("smoothquant"))
    r.smoothquant_alpha = doc.at("smoothquant").value("alpha", 0.8);
  if (doc.contains("kv_cache"))
    r.kv_cache = doc.at("kv_cache").value("strategy", "tensor") == "attn_head" ? quant::KvScaleStrategy::attn_head
                                                                               : quant::KvScaleStrategy::tensor;
  if (doc.contains("awq")) {
    r.awq = quant::AwqOptions{};
    r.awq->grid = doc.at("awq").value("grid", r.awq->grid);
    r.awq->duo_scaling = doc.at("awq").value("duo_scaling", r.awq->duo_scaling);
    r.awq->clip = doc.at("awq").value("clip", r.awq->clip);
  }
  r.lossless = doc.value("lossless", "none") == "zstd" ? Lossless::zstd : Lossless::none;
  r.calibration = calibration_from(doc);
  if (r.sparse_2_4 && r.act_order)
    r.act_order = false; // 2:4 groups are consecutive input columns: the column order must stay
  if (r.sparse_2_4 && r.method != Method::gptq)
    throw InputError(fmt::format("{}: algorithm.sparsity 2:4 needs method gptq (SparseGPT)", where));
  if (r.block_size % 4 != 0 && r.sparse_2_4)
    throw InputError(fmt::format("{}: algorithm.block_size must be a multiple of 4 with 2:4 sparsity", where));
  if (r.smoothquant_alpha && !r.input_activations)
    throw InputError(fmt::format("{}: smoothquant only helps when activations are quantized "
                                 "(add scheme.input_activations)",
                                 where));
  if (r.awq && (r.input_activations || r.weights.is_float() || r.smoothquant_alpha || r.delta))
    throw InputError(fmt::format("{}: awq smooths integer weight-only recipes (no input_activations, float "
                                 "weights, smoothquant or delta mode)",
                                 where));
  if (!r.weights.symmetric && (r.input_activations || r.weights.strategy == quant::Strategy::tensor || r.delta))
    throw InputError(fmt::format("{}: asymmetric weights are written weight-only, per channel or group (vLLM's "
                                 "pack-quantized with zero points)",
                                 where));
  if (r.delta && r.kv_cache)
    throw InputError(
        fmt::format("{}: kv_cache applies to model recipes (a delta is served on its base's cache)", where));
  if (r.delta && r.input_activations)
    throw InputError(fmt::format("{}: a delta recipe quantizes weights only (remove scheme.input_activations)", where));
  if (r.delta && !r.sparse_2_4)
    throw InputError(
        fmt::format("{}: the delta format stores 2:4-sparse deltas: set algorithm.sparsity: \"2:4\"", where));
  if (!r.delta && r.weights.levels == quant::Levels::midrise)
    throw InputError(fmt::format("{}: scheme.weights.levels midrise is for delta recipes only (compressed-tensors "
                                 "and vLLM use midtread grids)",
                                 where));
  if (r.delta && r.weights.is_float())
    throw InputError(fmt::format("{}: delta recipes use integer weights", where));
  if (!r.delta && r.lossless != Lossless::none)
    throw InputError(fmt::format("{}: lossless applies to delta recipes only (mode: delta)", where));
  if (r.weights.is_float() && r.method == Method::gptq)
    throw InputError(fmt::format("{}: float (FP8, FP4) weights use method rtn (GPTQ targets integer grids)", where));
  if (r.input_activations && r.input_activations->is_fp4() != r.weights.is_fp4())
    throw InputError(fmt::format("{}: FP4 activations go with FP4 weights (NVFP4 W4A4)", where));
  return r;
}

std::optional<quant::QuantArgs>
Recipe::layer_weights(std::int64_t layer) const {
  if (layer_bits.empty())
    return weights;
  const int bits = layer_bits.at(static_cast<std::size_t>(layer));
  if (bits >= 16)
    return std::nullopt;
  auto args = weights;
  args.bits = bits;
  return args;
}

std::vector<std::string>
bundled_recipe_names() {
  return bundled_yaml_names(recipes_directory());
}

Recipe
load_recipe(const std::string& name_or_path) {
  return load_recipe_file(resolve_bundled_yaml(name_or_path, recipes_directory(), "--recipe", "recipe"));
}

std::string
recipe_schema_help() {
  std::string out;
  std::function<void(const Schema&, const std::string&)> walk = [&](const Schema& s, const std::string& prefix) {
    for (const auto& f : s.fields) {
      out += fmt::format("  {}{} ({}{}): {}\n", prefix, f.name, config::type_name(f.type),
                         f.required ? ", required" : "", f.help);
      if (!f.choices.empty())
        out += fmt::format("      one of: {}\n", fmt::join(f.choices, ", "));
      if (f.object)
        walk(*f.object, prefix + f.name + ".");
    }
  };
  walk(recipe_schema(), "");
  return out;
}

} // namespace optkit::compress
