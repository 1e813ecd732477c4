#include "compress/delta_writer.hpp"

#include "compress/checkpoint_writer.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/weight_store.hpp"
#include "quant/compressed_tensors.hpp"
#include "quant/delta_format.hpp"
#include "quant/packing.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
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

} // namespace

DeltaWriteResult
write_delta_artifact(const std::filesystem::path& directory, const std::filesystem::path& finetuned,
                     const std::filesystem::path& base, const Recipe& recipe, const LayerwiseResult& result,
                     nlohmann::json report) {
  model::WeightStore variant(finetuned), base_store(base);
  const auto scale_dtype = variant.float_dtype();
  model::TensorSet out;
  std::set<std::string> done;
  for (const auto& linear : result.linears) {
    if (linear.sparse_2_4)
      add_sparse_delta(out, linear.module, linear.matrix, scale_dtype);
    else
      add_dense_delta(out, linear.module, linear.matrix, scale_dtype);
    done.insert(linear.module + ".weight");
  }
  DeltaWriteResult written;
  written.uncompressed_bytes = variant.element_count() * 2;
  for (const auto& name : variant.names()) {
    const auto view = variant.require(name);
    if (done.count(name))
      continue;
    const auto module = name.ends_with(".weight") ? name.substr(0, name.size() - 7) : name;
    const bool compressible = view.shape().size() == 2 && (module == "model.embed_tokens" || module == "lm_head");
    bool ignored = false;
    for (const auto& pattern : recipe.ignore)
      if (quant::module_matches(pattern, module))
        ignored = true;
    if (compressible && !ignored) {
      const auto b = base_store.find(name);
      if (!b.info || b.shape() != view.shape())
        throw InputError(fmt::format("{}: base {} has no matching tensor '{}'", base.string(), base.string(), name));
      auto delta = view.to_floats();
      const auto base_values = b.to_floats();
      for (std::size_t i = 0; i < delta.size(); ++i)
        delta[i] -= base_values[i];
      // Embedding rows are looked up, so no calibration reaches them (nor an LM head tied to
      // them): their Δ is rounded densely to the recipe's grid rather than pruned blind.
      add_dense_delta(out, module, quant::rtn(delta, view.shape()[0], view.shape()[1], recipe.weights, scale_dtype),
                      scale_dtype);
      continue;
    }
    out.add_view(name, view.dtype(), view.shape(), view.bytes);
  }
  std::filesystem::create_directories(directory);
  const auto file = quant::write_delta_tensors(directory, out.tensors(), recipe.lossless == Lossless::zstd);
  written.artifact_bytes = std::filesystem::file_size(directory / file);
  written.compression_ratio = static_cast<double>(written.uncompressed_bytes) /
                              static_cast<double>(std::max<std::uint64_t>(1, written.artifact_bytes));
  nlohmann::json config = {
      {"format", quant::kDeltaFormat},
      {"version", 1},
      {"tensors_file", file},
      {"bits", recipe.weights.bits},
      {"group_size", recipe.weights.group_size},
      {"levels", quant::levels_name(recipe.weights.levels)},
      {"sparsity", "2:4"},
      {"lossless", recipe.lossless == Lossless::zstd ? "zstd" : "none"},
      {"recipe", recipe.name},
      {"base", {{"path", std::filesystem::absolute(base).string()}, {"weights_sha256", quant::weights_sha256(base)}}},
      {"finetuned",
       {{"path", std::filesystem::absolute(finetuned).string()}, {"weights_sha256", quant::weights_sha256(finetuned)}}},
      {"artifact_bytes", written.artifact_bytes},
      {"finetuned_fp16_bytes", written.uncompressed_bytes},
      {"compression_ratio", written.compression_ratio}};
  write_file_atomic(directory / "delta_config.json", config.dump(2) + "\n");
  std::filesystem::copy_file(finetuned / "config.json", directory / "config.json");
  copy_tokenizer_files(finetuned, directory);
  std::filesystem::copy_file(recipe.source, directory / "recipe.yaml");
  report["artifact_bytes"] = written.artifact_bytes;
  report["compression_ratio"] = written.compression_ratio;
  write_file_atomic(directory / "compression_report.json", report.dump(2) + "\n");
  return written;
}

} // namespace optkit::compress
