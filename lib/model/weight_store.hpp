// All tensors of a Hugging Face model folder: model.safetensors, or the shards that
// model.safetensors.index.json names (every mapped tensor must be in its shard and every shard
// tensor must be mapped).
#pragma once

#include "model/safetensors.hpp"

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace optkit::model {

class WeightStore {
public:
  // `mode`: the shards mapped (zero copy, the default) or read into memory (model/safetensors.hpp).
  explicit WeightStore(const std::filesystem::path& model_dir, LoadMode mode = LoadMode::map);

  // View with info == nullptr when absent.
  TensorView find(const std::string& name) const;
  // Throws InputError naming the folder and tensor when absent.
  TensorView require(const std::string& name) const;
  std::vector<std::string> names() const;
  // The tensor's mapped pages leave the resident set (SafetensorsFile::release); absent: nothing.
  void release(const std::string& name) const;
  // Rows [first, first + count) of the 2-D tensor `name` widened to fp32, their mapped pages
  // released once read: a matrix of any size is read a block of rows at a time.
  std::vector<float> rows_as_floats(const std::string& name, std::int64_t first, std::int64_t count) const;
  // Copies the tensor's bytes to `write` a piece of at most `piece_bytes` at a time, each piece's
  // mapped pages released once written: a tensor of any size streams through a few pages.
  void stream(const std::string& name, const std::function<void(std::span<const std::byte>)>& write,
              std::size_t piece_bytes = std::size_t{64} << 20) const;
  // Elements over every tensor (fp16 size = 2 bytes each).
  std::uint64_t element_count() const;
  // The float dtype the model's weights are stored in (BF16 or F16; F32 otherwise), which
  // compressed-tensors also uses for scales.
  DType float_dtype() const;
  const std::vector<std::filesystem::path>& files() const { return m_files; }
  // Bytes of those files: what mapping and touching every tensor adds to the resident set.
  std::uint64_t file_bytes() const;

private:
  std::filesystem::path m_dir;
  std::vector<std::filesystem::path> m_files;
  std::vector<std::unique_ptr<SafetensorsFile>> m_shards;
  std::map<std::string, const SafetensorsFile*, std::less<>> m_owner;
};

} // namespace optkit::model
