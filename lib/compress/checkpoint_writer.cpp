#include "compress/checkpoint_writer.hpp"

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/model_config.hpp"
#include "quant/compressed_tensors.hpp"
#include "quant/packing.hpp"
#include "runtime/layerwise_model.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <set>

namespace optkit::compress {

namespace {

// The weight_scale tensor's shape: [1] for a tensor scale, one per [block_rows, block_cols]
// tile, else one per row and group.
std::vector<std::int64_t>
scale_shape(const quant::QuantArgs& args, std::int64_t rows, std::int64_t cols) {
  const auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  switch (args.strategy) {
  case quant::Strategy::tensor:
    return {1};
  case quant::Strategy::block:
    return {ceil_div(rows, args.block_rows), ceil_div(cols, args.block_cols)};
  case quant::Strategy::group:
  case quant::Strategy::tensor_group:
    return {rows, ceil_div(cols, std::min(args.group_size, cols))};
  default:
    return {rows, 1};
  }
}

// FP4's weight_scale holds codes: NVFP4's FP8 E4M3, MXFP4's E8M0 exponents as U8.
model::DType
fp4_scale_dtype(const quant::QuantArgs& args) {
  return args.has_power_of_two_scales() ? model::DType::u8 : model::DType::f8_e4m3;
}

// How weight_scale is stored: FP4's as codes, any other in the model's dtype.
model::DType
stored_scale_dtype(const quant::QuantArgs& args, model::DType model_dtype) {
  return args.is_fp4() ? fp4_scale_dtype(args) : model_dtype;
}

// The grid's scales as weight_scale holds them: a block grid's first row of each row block, a
// tensor grid's one value, else all.
std::vector<float>
stored_scales(const quant::QuantGrid& grid) {
  if (grid.args.strategy == quant::Strategy::tensor)
    return {grid.scale.front()};
  if (grid.args.strategy != quant::Strategy::block)
    return grid.scale;
  std::vector<float> out;
  for (std::int64_t r = 0; r < grid.rows; r += grid.args.block_rows)
    out.insert(out.end(), grid.scale.begin() + r * grid.groups(), grid.scale.begin() + (r + 1) * grid.groups());
  return out;
}

// An asymmetric grid's zero points, [rows, groups] integers packed down the columns.
std::vector<std::int32_t>
packed_zero_points(const quant::QuantGrid& grid) {
  std::vector<std::int8_t> zeros(grid.zero.size());
  for (std::size_t i = 0; i < zeros.size(); ++i)
    zeros[i] = static_cast<std::int8_t>(grid.zero[i]);
  return quant::pack_columns(zeros, grid.rows, grid.groups(), grid.args.bits);
}

// FP4 values two to a byte with their scale codes and, for NVFP4, the global scales.
void
add_fp4_linear(model::TensorSet& out, const CompressedLinear& linear) {
  const auto& m = linear.matrix;
  const auto& grid = *m.grid;
  const auto& p = linear.module;
  std::vector<std::uint8_t> codes(m.q.size());
  for (std::size_t i = 0; i < codes.size(); ++i)
    codes[i] = quant::fp4_code(m.q[i]);
  out.add_values(p + ".weight_packed", model::DType::u8, {m.rows, m.cols / 2},
                 quant::pack_fp4_rows(codes, m.rows, m.cols));
  out.add_values(p + ".weight_scale", fp4_scale_dtype(grid.args), scale_shape(grid.args, m.rows, m.cols),
                 grid.scale_codes);
  if (!grid.args.has_global_scale())
    return;
  out.add_values(p + ".weight_global_scale", model::DType::f32, {1}, std::vector<float>{grid.global_scale});
  if (linear.input_global_scale)
    out.add_values(p + ".input_global_scale", model::DType::f32, {1}, std::vector<float>{*linear.input_global_scale});
}

void
add_compressed_linear(model::TensorSet& out, const CompressedLinear& linear, const std::string& format,
                      model::DType scale_dtype) {
  const auto& m = linear.matrix;
  const auto& grid = *m.grid;
  const auto& p = linear.module;
  if (grid.args.is_fp4())
    return add_fp4_linear(out, linear);
  if (format == "float-quantized") {
    std::vector<std::uint8_t> codes(m.q.size());
    for (std::size_t i = 0; i < codes.size(); ++i)
      codes[i] = quant::float_to_f8_e4m3(m.q[i]);
    out.add_values(p + ".weight", model::DType::f8_e4m3, {m.rows, m.cols}, codes);
  } else {
    std::vector<std::int8_t> values(m.q.size());
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = static_cast<std::int8_t>(m.q[i]);
    if (format == "pack-quantized") {
      out.add_values(p + ".weight_packed", model::DType::i32, {m.rows, quant::packed_words(m.cols, grid.args.bits)},
                     quant::pack_rows(values, m.rows, m.cols, grid.args.bits));
      out.add_values(p + ".weight_shape", model::DType::i64, {2}, std::vector<std::int64_t>{m.rows, m.cols});
      if (!grid.args.symmetric)
        out.add_values(p + ".weight_zero_point", model::DType::i32,
                       {quant::packed_words(m.rows, grid.args.bits), grid.groups()}, packed_zero_points(grid));
    } else {
      out.add_values(p + ".weight", model::DType::i8, {m.rows, m.cols}, values);
    }
  }
  out.add_bytes(p + ".weight_scale", scale_dtype, scale_shape(grid.args, m.rows, m.cols),
                model::encode_floats(stored_scales(grid), scale_dtype));
}

// `re:model[.]layers[.](0|3|7)[.]`: every module of those decoder layers (vLLM anchors re: at the start).
std::string
layers_pattern(const std::vector<std::int64_t>& layers) {
  return fmt::format("re:model[.]layers[.]({})[.]", fmt::join(layers, "|"));
}

// The recipe's one config group, or with a plan one group per bitwidth targeting its layers and
// the plan's 16-bit layers added to the ignore list. A mixture of experts' routers stay as they
// are, ignored by the names vLLM's fused-MoE models give them (llm-compressor's patterns).
quant::QuantizationConfig
quantization_config(const Recipe& recipe, const model::ModelConfig& config) {
  quant::QuantizationConfig q;
  q.format = quant::infer_format(recipe.weights, recipe.input_activations);
  q.ignore = recipe.ignore;
  q.kv_cache = recipe.kv_cache;
  if (config.num_experts > 0)
    q.ignore.push_back(config.architecture == model::Architecture::mixtral ? "re:.*block_sparse_moe.gate$"
                                                                           : "re:.*mlp.gate$");
  if (config.shared_expert_intermediate_size > 0)
    q.ignore.push_back("re:.*shared_expert_gate$");
  if (recipe.layer_bits.empty()) {
    q.groups.push_back({recipe.targets, recipe.weights, recipe.input_activations});
    return q;
  }
  std::map<int, std::vector<std::int64_t>> layers_by_bits;
  for (std::size_t i = 0; i < recipe.layer_bits.size(); ++i)
    layers_by_bits[recipe.layer_bits[i]].push_back(static_cast<std::int64_t>(i));
  for (const auto& [bits, layers] : layers_by_bits) {
    auto args = recipe.layer_weights(layers.front());
    if (!args)
      q.ignore.push_back(layers_pattern(layers));
    else
      q.groups.push_back({{layers_pattern(layers)}, *args, recipe.input_activations});
  }
  return q;
}

// The tensors add_compressed_linear writes for a [rows, cols] linear quantized by `args`
// (`input_activations`: the recipe's, whose NVFP4 global scale is stored per linear).
std::vector<model::TensorSpec>
compressed_linear_specs(const std::string& p, const quant::QuantArgs& args, std::int64_t rows, std::int64_t cols,
                        const std::string& format, model::DType scale_dtype,
                        const std::optional<quant::QuantArgs>& input_activations) {
  std::vector<model::TensorSpec> out;
  if (args.is_fp4()) {
    out.push_back({p + ".weight_packed", model::DType::u8, {rows, cols / 2}});
  } else if (format == "float-quantized") {
    out.push_back({p + ".weight", model::DType::f8_e4m3, {rows, cols}});
  } else if (format == "pack-quantized") {
    out.push_back({p + ".weight_packed", model::DType::i32, {rows, quant::packed_words(cols, args.bits)}});
    out.push_back({p + ".weight_shape", model::DType::i64, {2}});
    if (!args.symmetric)
      out.push_back({p + ".weight_zero_point",
                     model::DType::i32,
                     {quant::packed_words(rows, args.bits), scale_shape(args, rows, cols).back()}});
  } else {
    out.push_back({p + ".weight", model::DType::i8, {rows, cols}});
  }
  out.push_back({p + ".weight_scale", stored_scale_dtype(args, scale_dtype), scale_shape(args, rows, cols)});
  if (args.has_global_scale())
    out.push_back({p + ".weight_global_scale", model::DType::f32, {1}});
  if (args.has_global_scale() && input_activations && input_activations->has_global_scale())
    out.push_back({p + ".input_global_scale", model::DType::f32, {1}});
  return out;
}

// The output's tensors: the compressed linears layer by layer, then every other source tensor by
// name (norms keep their place and shape when SmoothQuant changes their values).
std::vector<model::TensorSpec>
planned_tensors(const model::WeightStore& store, const Recipe& recipe, const std::string& format,
                const model::ModelConfig& config) {
  std::vector<model::TensorSpec> out;
  std::set<std::string> replaced;
  for (std::int64_t layer = 0; layer < config.num_layers; ++layer)
    for (const auto& linear : runtime::layer_linears(config, layer)) {
      const auto module = fmt::format("model.layers.{}.{}", layer, linear.name);
      const auto args = compressed_weight_args(recipe, layer, module);
      if (!args)
        continue;
      const auto source = store.require(module + ".weight");
      const auto specs = compressed_linear_specs(module, *args, source.shape().at(0), source.shape().at(1), format,
                                                 store.float_dtype(), recipe.input_activations);
      out.insert(out.end(), specs.begin(), specs.end());
      replaced.insert(module + ".weight");
    }
  for (const auto& name : store.names())
    if (!replaced.contains(name)) {
      const auto view = store.require(name);
      out.push_back({name, view.dtype(), view.shape()});
    }
  if (recipe.kv_cache)
    for (std::int64_t layer = 0; layer < config.num_layers; ++layer)
      for (const auto& name : quant::kv_scale_names(layer))
        out.push_back({name, store.float_dtype(),
                       *recipe.kv_cache == quant::KvScaleStrategy::attn_head
                           ? std::vector<std::int64_t>{config.num_kv_heads, 1, 1}
                           : std::vector<std::int64_t>{1}});
  return out;
}

} // namespace

void
copy_tokenizer_files(const std::filesystem::path& from, const std::filesystem::path& to) {
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                           "generation_config.json", "chat_template.jinja"})
    if (std::filesystem::is_regular_file(from / name))
      std::filesystem::copy_file(from / name, to / name, std::filesystem::copy_options::overwrite_existing);
}

std::uint64_t
safetensors_bytes(const std::filesystem::path& directory) {
  std::uint64_t total = 0;
  for (const auto& entry : std::filesystem::directory_iterator(directory))
    if (entry.path().extension() == ".safetensors")
      total += entry.file_size();
  return total;
}

CompressedCheckpointWriter::CompressedCheckpointWriter(const std::filesystem::path& directory,
                                                       const std::filesystem::path& source, const Recipe& recipe,
                                                       std::uint64_t max_shard_bytes)
    : m_directory(directory)
    , m_source(source)
    , m_recipe(recipe)
    , m_store(source)
    , m_config(model::load_model_config(source))
    , m_format(quantization_config(recipe, m_config).format) {
  m_shards = std::make_unique<model::ShardedSafetensorsWriter>(
      directory, planned_tensors(m_store, recipe, m_format, m_config), max_shard_bytes);
  for (const auto& spec : m_shards->tensors())
    if (!spec.name.starts_with("model.layers.") && m_store.find(spec.name).info)
      copy_from_source(spec.name);
}

void
CompressedCheckpointWriter::copy_from_source(const std::string& name) {
  m_store.stream(name, [&](std::span<const std::byte> piece) { m_shards->append(name, piece); });
}

void
CompressedCheckpointWriter::add_linear(const CompressedLinear& linear) {
  model::TensorSet encoded;
  add_compressed_linear(encoded, linear, m_format, m_store.float_dtype());
  for (const auto& t : encoded.tensors())
    m_shards->write(t.name, t.bytes);
}

void
CompressedCheckpointWriter::end_layer(std::int64_t layer, const std::map<std::string, std::vector<float>>& computed) {
  for (const auto& tensor : computed) {
    const auto& name = tensor.first; // a structured binding: clang 14 captures none in lambdas
    const auto planned = std::find_if(m_shards->tensors().begin(), m_shards->tensors().end(),
                                      [&](const model::TensorSpec& spec) { return spec.name == name; });
    if (planned == m_shards->tensors().end())
      throw RuntimeFailure(fmt::format("compress: {} was computed but not planned", name));
    m_shards->write(name, model::encode_floats(tensor.second, planned->dtype));
  }
  const auto prefix = fmt::format("model.layers.{}.", layer);
  for (const auto& spec : m_shards->tensors())
    if (spec.name.starts_with(prefix) && !m_shards->written(spec.name) && m_store.find(spec.name).info)
      copy_from_source(spec.name);
}

std::uint64_t
CompressedCheckpointWriter::finish(const nlohmann::json& report) {
  m_shards->finish();
  auto config = read_json_file(m_source / "config.json");
  config["quantization_config"] = quant::to_json(quantization_config(m_recipe, m_config));
  write_file_atomic(m_directory / "config.json", config.dump(2) + "\n");
  copy_tokenizer_files(m_source, m_directory);
  std::filesystem::copy_file(m_recipe.source, m_directory / "recipe.yaml");
  write_file_atomic(m_directory / "compression_report.json", report.dump(2) + "\n");
  return safetensors_bytes(m_directory);
}

} // namespace optkit::compress
