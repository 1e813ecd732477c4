// All tensors of a Hugging Face model folder: model.safetensors, or the shards that
// model.safetensors.index.json names (every mapped tensor must be in its shard and every shard
// tensor must be mapped). Or those of a GGUF file (model/gguf_model.hpp), under their HF names:
// its F32 / F16 / BF16 vectors and matrices in HF row order are ordinary tensors; every matrix,
// quantized or not, is also a GgufMatrix (the runtime's loader reads those).
#pragma once

#include "model/gguf_file.hpp"
#include "model/safetensors.hpp"

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace optkit::model {

// A GGUF tensor by its HF name: ggml-typed rows of `cols` values; rope_head_dim > 0 when its rows
// are in llama.cpp's RoPE order within heads of that many rows (q_proj, k_proj:
// model/gguf_names.hpp).
struct GgufMatrix {
  GgmlType type = GgmlType::f32;
  std::span<const std::byte> bytes;
  std::int64_t rows = 0, cols = 0;
  std::int64_t rope_head_dim = 0;
};

class WeightStore {
public:
  // `mode`: the shards mapped (zero copy, the default) or read into memory (model/safetensors.hpp).
  // `model_dir` may be a GGUF file.
  explicit WeightStore(const std::filesystem::path& model_dir, LoadMode mode = LoadMode::map);

  bool is_gguf() const { return m_gguf != nullptr; }
  // A GGUF file's tensor by HF name; none when absent or when the store reads safetensors.
  std::optional<GgufMatrix> gguf_matrix(const std::string& name) const;

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
  void open_gguf(LoadMode mode);
  // InputError: what safetensors folders offer and GGUF files do not.
  void require_safetensors(const char* what) const;

  std::filesystem::path m_dir;
  std::unique_ptr<GgufFile> m_gguf;
  struct GgufEntry {
    const GgufTensorInfo* tensor = nullptr;
    std::int64_t expert = -1; // a stacked experts tensor's matrix `expert`; -1: the whole tensor
    TensorInfo info;          // HF shape; dtype for the float types
    bool plain = false;       // readable as an ordinary tensor (float type, rows in HF order)
  };
  void add_gguf_entry(const GgufTensorInfo& tensor, std::string hf_name, std::int64_t expert);
  std::span<const std::byte> entry_bytes(const GgufEntry& entry) const;
  std::map<std::string, GgufEntry, std::less<>> m_gguf_tensors;
  std::int64_t m_gguf_head_dim = 0;
  std::string m_gguf_architecture; // general.architecture: whether q/k rows are permuted
  std::vector<std::filesystem::path> m_files;
  std::vector<std::unique_ptr<SafetensorsFile>> m_shards;
  std::map<std::string, const SafetensorsFile*, std::less<>> m_owner;
};

} // namespace optkit::model
