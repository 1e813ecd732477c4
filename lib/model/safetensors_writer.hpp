// Writes safetensors files the way transformers does: 8-byte aligned JSON header with
// __metadata__ {"format": "pt"}, tensors packed in order, each file written to a temporary sibling
// and renamed into place; large models split into shards with model.safetensors.index.json.
#pragma once

#include "model/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace optkit::model {

struct TensorToWrite {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> bytes; // must be shape x dtype size long
};

// Tensors to write: views of bytes that outlive the set (a mapped file's tensors) and values
// computed in memory, whose bytes the set owns.
class TensorSet {
public:
  void add_view(std::string name, DType dtype, std::vector<std::int64_t> shape, std::span<const std::byte> bytes);
  void add_bytes(std::string name, DType dtype, std::vector<std::int64_t> shape, std::vector<std::byte> bytes);
  template <typename T>
  void add_values(std::string name, DType dtype, std::vector<std::int64_t> shape, const std::vector<T>& values) {
    const auto bytes = std::as_bytes(std::span(values));
    add_bytes(std::move(name), dtype, std::move(shape), std::vector<std::byte>(bytes.begin(), bytes.end()));
  }
  const std::vector<TensorToWrite>& tensors() const { return m_tensors; }

private:
  std::vector<TensorToWrite> m_tensors;
  std::vector<std::unique_ptr<std::vector<std::byte>>> m_storage; // stable addresses for the spans
};

// One file. `metadata` is merged over {"format": "pt"}.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Into `directory`: model.safetensors when everything fits in `max_shard_bytes`, otherwise
// model-0000i-of-0000N.safetensors plus model.safetensors.index.json (tensors are never split).
// Returns the file names written.
std::vector<std::string> write_safetensors_sharded(const std::filesystem::path& directory,
                                                   const std::vector<TensorToWrite>& tensors,
                                                   std::uint64_t max_shard_bytes,
                                                   const std::map<std::string, std::string>& metadata = {});

} // namespace optkit::model
