#include "compress/delta_writer.hpp"

#include "compress/checkpoint_writer.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/model_config.hpp"
#include "model/weight_store.hpp"
#include "quant/compressed_tensors.hpp"
#include "quant/delta_format.hpp"
#include "quant/packing.hpp"
#include "runtime/decoder_pass.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <memory>
#include <set>

namespace optkit::compress {

namespace {

void
add_sparse_delta(model::TensorSet& out, const std::string& module, const quant::CompressedMatrix& cm,
                 model::DType scale_dtype) {
  const auto& grid = *cm.grid;
  const auto enc = quant::encode_sparse_2_4(cm.q, cm.kept, grid.rows, grid.cols, grid.args.bits);
  out.add_values(module + ".delta_values", model::DType::i32,
                 {grid.rows, static_cast<std::int64_t>(enc.values.size()) / grid.rows}, enc.values);
  out.add_values(module + ".delta_indices", model::DType::u8, {grid.rows, grid.cols / 8}, enc.indices);
  out.add_bytes(module + ".delta_scale", scale_dtype, {grid.rows, grid.groups()},
                model::encode_floats(grid.scale, scale_dtype));
}

void
add_dense_delta(model::TensorSet& out, const std::string& module, const quant::CompressedMatrix& cm,
                model::DType scale_dtype) {
  const auto& grid = *cm.grid;
  std::vector<std::int8_t> values(cm.q.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<std::int8_t>(cm.q[i]);
  out.add_values(module + ".delta_packed", model::DType::i32,
                 {grid.rows, quant::packed_words(grid.cols, grid.args.bits)},
                 quant::pack_rows(values, grid.rows, grid.cols, grid.args.bits));
  out.add_bytes(module + ".delta_scale", scale_dtype, {grid.rows, grid.groups()},
                model::encode_floats(grid.scale, scale_dtype));
}

// Rows of a Δ rounded densely at once: 8,192 rows of 4,096 columns are 134 MB of fp32.
constexpr std::int64_t kRoundedRowBlock = 8192;

std::int64_t
scale_groups(const quant::QuantArgs& args, std::int64_t cols) {
  const std::int64_t group = args.strategy == quant::Strategy::group ? std::min(args.group_size, cols) : cols;
  return (cols + group - 1) / group;
}

// The tensors add_sparse_delta / add_dense_delta write for a [rows, cols] Δ.
std::vector<model::TensorSpec>
delta_specs(const std::string& module, const quant::QuantArgs& args, std::int64_t rows, std::int64_t cols, bool sparse,
            model::DType scale_dtype) {
  std::vector<model::TensorSpec> out;
  if (sparse) {
    out.push_back({module + ".delta_values", model::DType::i32, {rows, quant::packed_words(cols / 2, args.bits)}});
    out.push_back({module + ".delta_indices", model::DType::u8, {rows, cols / 8}});
  } else {
    out.push_back({module + ".delta_packed", model::DType::i32, {rows, quant::packed_words(cols, args.bits)}});
  }
  out.push_back({module + ".delta_scale", scale_dtype, {rows, scale_groups(args, cols)}});
  return out;
}

std::string
module_of(const std::string& name) {
  return name.ends_with(".weight") ? name.substr(0, name.size() - 7) : name;
}

// The embeddings and an LM head that calibration does not reach: their Δ is rounded densely to the
// recipe's grid (rows are looked up, so pruning them blind would lose whole tokens).
bool
rounded_delta(const Recipe& recipe, const model::TensorView& view, const std::string& module) {
  if (view.shape().size() != 2 || (module != "model.embed_tokens" && module != "lm_head"))
    return false;
  return std::none_of(recipe.ignore.begin(), recipe.ignore.end(),
                      [&](const std::string& pattern) { return quant::module_matches(pattern, module); });
}

// delta.safetensors's tensors, in the order the artifact has always had: the compressed linears
// layer by layer (the calibrated LM head's last), then every other tensor of the variant by name;
// and of those others, which are copied and which have their Δ rounded.
struct DeltaPlan {
  std::vector<model::TensorSpec> tensors;
  std::vector<std::string> copied, rounded; // variant tensor names
};

DeltaPlan
plan_delta(const model::WeightStore& variant, const Recipe& recipe, const model::ModelConfig& config) {
  DeltaPlan plan;
  std::set<std::string> compressed;
  auto add = [&](const std::string& module, const quant::QuantArgs& args, std::int64_t rows, std::int64_t cols,
                 bool sparse) {
    const auto specs = delta_specs(module, args, rows, cols, sparse, variant.float_dtype());
    plan.tensors.insert(plan.tensors.end(), specs.begin(), specs.end());
  };
  auto add_compressed = [&](const std::string& module, const quant::QuantArgs& args, bool sparse) {
    const auto source = variant.require(module + ".weight");
    add(module, args, source.shape().at(0), source.shape().at(1), sparse);
    compressed.insert(module + ".weight");
  };
  for (std::int64_t layer = 0; layer < config.num_layers; ++layer)
    for (const auto& linear : runtime::kDecoderLinears) {
      const auto module = fmt::format("model.layers.{}.{}", layer, linear.name);
      if (const auto args = compressed_weight_args(recipe, layer, module))
        add_compressed(module, *args, recipe.sparse_2_4);
    }
  if (calibrates_head_delta(recipe, config))
    add_compressed("lm_head", recipe.weights, false);
  for (const auto& name : variant.names()) {
    if (compressed.contains(name))
      continue;
    const auto view = variant.require(name);
    if (rounded_delta(recipe, view, module_of(name))) {
      add(module_of(name), recipe.weights, view.shape()[0], view.shape()[1], false);
      plan.rounded.push_back(name);
    } else {
      plan.tensors.push_back({name, view.dtype(), view.shape()});
      plan.copied.push_back(name);
    }
  }
  return plan;
}

} // namespace

DeltaArtifactWriter::DeltaArtifactWriter(const std::filesystem::path& directory, const std::filesystem::path& finetuned,
                                         const std::filesystem::path& base, const Recipe& recipe)
    : m_directory(directory)
    , m_finetuned(finetuned)
    , m_base(base)
    , m_recipe(recipe)
    , m_variant(finetuned)
    , m_base_store(base) {
  const auto plan = plan_delta(m_variant, recipe, model::load_model_config(finetuned));
  m_file = std::make_unique<model::ShardedSafetensorsWriter>(
      directory, plan.tensors, std::numeric_limits<std::uint64_t>::max(), std::map<std::string, std::string>{},
      quant::kDeltaPlainFile);
  for (const auto& name : plan.copied)
    m_variant.stream(name, [&](std::span<const std::byte> piece) { m_file->append(name, piece); });
  for (const auto& name : plan.rounded)
    write_rounded_delta(name);
}

void
DeltaArtifactWriter::write_rounded_delta(const std::string& name) {
  const auto view = m_variant.require(name);
  const auto b = m_base_store.find(name);
  if (!b.info || b.shape() != view.shape())
    throw InputError(
        fmt::format("{}: the base has no tensor '{}' of the fine-tuned model's shape", m_base.string(), name));
  const auto rows = view.shape()[0], cols = view.shape()[1];
  const auto module = module_of(name);
  // A tensor-wide scale needs every row at once; group and channel scales are per row.
  const auto block = m_recipe.weights.strategy == quant::Strategy::tensor ? rows : kRoundedRowBlock;
  for (std::int64_t first = 0; first < rows; first += block) {
    const auto count = std::min(block, rows - first);
    auto delta = m_variant.rows_as_floats(name, first, count);
    const auto base_values = m_base_store.rows_as_floats(name, first, count);
    for (std::size_t i = 0; i < delta.size(); ++i)
      delta[i] -= base_values[i];
    add_linear({module, quant::rtn(delta, count, cols, m_recipe.weights, m_variant.float_dtype()), false});
  }
}

void
DeltaArtifactWriter::add_linear(const CompressedLinear& linear) {
  model::TensorSet encoded;
  if (linear.sparse_2_4)
    add_sparse_delta(encoded, linear.module, linear.matrix, m_variant.float_dtype());
  else
    add_dense_delta(encoded, linear.module, linear.matrix, m_variant.float_dtype());
  for (const auto& t : encoded.tensors())
    m_file->append(t.name, t.bytes);
}

DeltaWriteResult
DeltaArtifactWriter::finish(nlohmann::json report) {
  m_file->finish();
  const bool zstd = m_recipe.lossless == Lossless::zstd;
  if (zstd)
    quant::zstd_compress_delta_tensors(m_directory);
  const std::string file = zstd ? quant::kDeltaZstdFile : quant::kDeltaPlainFile;
  DeltaWriteResult written;
  written.uncompressed_bytes = m_variant.element_count() * 2;
  written.artifact_bytes = std::filesystem::file_size(m_directory / file);
  written.compression_ratio = static_cast<double>(written.uncompressed_bytes) /
                              static_cast<double>(std::max<std::uint64_t>(1, written.artifact_bytes));
  nlohmann::json config = {
      {"format", quant::kDeltaFormat},
      {"version", 1},
      {"tensors_file", file},
      {"bits", m_recipe.weights.bits},
      {"group_size", m_recipe.weights.group_size},
      {"levels", quant::levels_name(m_recipe.weights.levels)},
      {"sparsity", "2:4"},
      {"lossless", m_recipe.lossless == Lossless::zstd ? "zstd" : "none"},
      {"recipe", m_recipe.name},
      {"base",
       {{"path", std::filesystem::absolute(m_base).string()}, {"weights_sha256", quant::weights_sha256(m_base)}}},
      {"finetuned",
       {{"path", std::filesystem::absolute(m_finetuned).string()},
        {"weights_sha256", quant::weights_sha256(m_finetuned)}}},
      {"artifact_bytes", written.artifact_bytes},
      {"finetuned_fp16_bytes", written.uncompressed_bytes},
      {"compression_ratio", written.compression_ratio}};
  write_file_atomic(m_directory / "delta_config.json", config.dump(2) + "\n");
  std::filesystem::copy_file(m_finetuned / "config.json", m_directory / "config.json");
  copy_tokenizer_files(m_finetuned, m_directory);
  std::filesystem::copy_file(m_recipe.source, m_directory / "recipe.yaml");
  report["artifact_bytes"] = written.artifact_bytes;
  report["compression_ratio"] = written.compression_ratio;
  write_file_atomic(m_directory / "compression_report.json", report.dump(2) + "\n");
  return written;
}

} // namespace optkit::compress
