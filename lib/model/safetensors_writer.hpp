// Writes safetensors files the way transformers does: 8-byte aligned JSON header with
// __metadata__ {"format": "pt"}, tensors packed in order, each file written to a temporary sibling
// and renamed into place; large models split into shards with model.safetensors.index.json.
// ShardedSafetensorsWriter does the same for tensors whose bytes come one at a time (a model
// compressed layer by layer): the layout is fixed up front, so nothing need be held in memory.
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

// A tensor's name, dtype and shape: what a header says of it before its bytes exist.
struct TensorSpec {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;

  std::uint64_t byte_size() const;
};

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

// The files write_safetensors_sharded would write for `tensors`, with their bytes given later, in
// any order: each shard's header is written at construction, each tensor's bytes at their place
// (the page cache holds them, not this process), and a shard is synced and renamed into place as
// soon as its last tensor is written. finish() writes the index last. Destroyed unfinished, it
// removes the shards it had not completed.
class ShardedSafetensorsWriter {
public:
  // `single_file`: the file's name when one holds everything.
  ShardedSafetensorsWriter(const std::filesystem::path& directory, std::vector<TensorSpec> tensors,
                           std::uint64_t max_shard_bytes, const std::map<std::string, std::string>& metadata = {},
                           const std::string& single_file = "model.safetensors");
  ~ShardedSafetensorsWriter();
  ShardedSafetensorsWriter(const ShardedSafetensorsWriter&) = delete;
  ShardedSafetensorsWriter& operator=(const ShardedSafetensorsWriter&) = delete;

  const std::vector<TensorSpec>& tensors() const { return m_tensors; }
  // Whether `name`'s bytes were written (false for a name not planned).
  bool written(const std::string& name) const;
  // RuntimeFailure if `name` is not planned, was written already, or `bytes` is not its size.
  void write(const std::string& name, std::span<const std::byte> bytes);
  // The next part of `name`'s bytes (a tensor streamed piece by piece); RuntimeFailure if it
  // would run past the tensor's size.
  void append(const std::string& name, std::span<const std::byte> bytes);
  // RuntimeFailure naming a tensor never written. Returns the file names, the index last.
  std::vector<std::string> finish();

private:
  struct Shard {
    std::filesystem::path path, temporary;
    int fd = -1;
    std::uint64_t pending = 0; // tensor bytes not yet written
  };
  struct Slot {
    std::size_t shard = 0;
    std::uint64_t offset = 0; // in the file
    std::uint64_t size = 0;
    std::uint64_t done = 0; // bytes written so far
  };
  Slot& slot(const std::string& name);
  void open_shards(const std::vector<std::vector<std::size_t>>& plan,
                   const std::map<std::string, std::string>& metadata, const std::string& single_file);
  void complete(Shard& shard);
  // Closes and removes the shards not yet completed.
  void abandon();

  std::filesystem::path m_directory;
  std::vector<TensorSpec> m_tensors;
  std::vector<Shard> m_shards;
  std::map<std::string, Slot, std::less<>> m_slots;
  std::vector<std::string> m_names; // file names, in order
};

} // namespace optkit::model
