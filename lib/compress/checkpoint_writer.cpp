#include "compress/checkpoint_writer.hpp"

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/safetensors_writer.hpp"
#include "model/weight_store.hpp"
#include "quant/compressed_tensors.hpp"
#include "quant/packing.hpp"

#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <set>

namespace optkit::compress {

namespace {

constexpr std::uint64_t kMaxShardBytes = 5'000'000'000ULL; // transformers' save_pretrained default

void
add_compressed_linear(model::TensorSet& out, const CompressedLinear& linear, const std::string& format,
                      model::DType scale_dtype) {
  const auto& m = linear.matrix;
  const auto& grid = *m.grid;
  const auto& p = linear.module;
  const auto groups = grid.groups();
  std::vector<float> scales(grid.scale);
  std::vector<std::int64_t> scale_shape = {m.rows, groups};
  if (grid.args.strategy == quant::Strategy::tensor) {
    scales.resize(1);
    scale_shape = {1};
  }
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
    } else {
      out.add_values(p + ".weight", model::DType::i8, {m.rows, m.cols}, values);
    }
  }
  out.add_bytes(p + ".weight_scale", scale_dtype, scale_shape, model::encode_floats(scales, scale_dtype));
}

// `re:model[.]layers[.](0|3|7)[.]`: every module of those decoder layers (vLLM anchors re: at the start).
std::string
layers_pattern(const std::vector<std::int64_t>& layers) {
  return fmt::format("re:model[.]layers[.]({})[.]", fmt::join(layers, "|"));
}

// The recipe's one config group, or with a plan one group per bitwidth targeting its layers and
// the plan's 16-bit layers added to the ignore list.
quant::QuantizationConfig
quantization_config(const Recipe& recipe) {
  quant::QuantizationConfig q;
  q.format = quant::infer_format(recipe.weights, recipe.input_activations);
  q.ignore = recipe.ignore;
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

std::uint64_t
write_compressed_checkpoint(const std::filesystem::path& directory, const std::filesystem::path& source,
                            const Recipe& recipe, const LayerwiseResult& result, const nlohmann::json& report) {
  model::WeightStore store(source);
  auto config = read_json_file(source / "config.json");
  const auto q = quantization_config(recipe);
  config["quantization_config"] = quant::to_json(q);

  const auto scale_dtype = store.float_dtype();
  model::TensorSet out;
  std::set<std::string> replaced;
  for (const auto& linear : result.linears) {
    add_compressed_linear(out, linear, q.format, scale_dtype);
    replaced.insert(linear.module + ".weight");
  }
  for (const auto& name : store.names()) {
    if (replaced.count(name))
      continue;
    const auto view = store.require(name);
    if (const auto it = result.smoothed_norms.find(name); it != result.smoothed_norms.end()) {
      out.add_bytes(name, view.dtype(), view.shape(), model::encode_floats(it->second, view.dtype()));
      continue;
    }
    out.add_view(name, view.dtype(), view.shape(), view.bytes);
  }
  model::write_safetensors_sharded(directory, out.tensors(), kMaxShardBytes);
  write_file_atomic(directory / "config.json", config.dump(2) + "\n");
  copy_tokenizer_files(source, directory);
  std::filesystem::copy_file(recipe.source, directory / "recipe.yaml");
  write_file_atomic(directory / "compression_report.json", report.dump(2) + "\n");
  return safetensors_bytes(directory);
}

} // namespace optkit::compress
