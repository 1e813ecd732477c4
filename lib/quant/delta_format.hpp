// optkit's compressed-delta artifact (DeltaZip ΔCompress output): a folder with
//   delta_config.json   format "optkit-delta" v1, lineage (base and fine-tuned weight hashes),
//                       the recipe, the scheme, sizes and the compression ratio; "levels":
//                       "midrise" when a stored value q means (q + ½)·scale, "midtread" (or
//                       absent) when it means q·scale
//   delta.safetensors   (or delta.safetensors.zst after the lossless zstd stage) holding, for
//                       every compressed matrix P (linear layers, embeddings, lm_head), its 2:4
//                       sparse quantized Δ = W_finetuned − W_base:
//     P.delta_values   I32 [rows, words]    the two kept grid values of every 4 columns, packed
//                                           like compressed-tensors (offset, LSB first)
//     P.delta_indices  U8  [rows, cols/8]   per group of 4 a nibble: kept positions (2 bits each,
//                                           first in the low bits); two groups per byte, the
//                                           even group in the low nibble
//     P.delta_scale    F32/BF16/F16 [rows, groups]  symmetric scales per group of input columns
//   or, for matrices no calibration reaches (embeddings, lm_head), a dense quantized Δ:
//     P.delta_packed   I32 [rows, words]    every grid value, packed the same way
//     P.delta_scale    as above
//   and the variant's own norm weights as they are, plus its config.json and tokenizer files.
#pragma once

#include "model/dtype.hpp"
#include "model/safetensors.hpp"
#include "model/safetensors_writer.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace optkit::quant {

inline constexpr const char* kDeltaFormat = "optkit-delta";

struct Sparse24Encoding {
  std::vector<std::int32_t> values;  // rows x packed_words(cols / 2, bits)
  std::vector<std::uint8_t> indices; // rows x cols / 8
};

// q: [rows, cols] signed grid values; kept: the 2:4 mask, exactly 2 of every aligned group of 4
// set (cols % 8 == 0), as SparseGPT 2:4 leaves it.
Sparse24Encoding encode_sparse_2_4(std::span<const float> q, std::span<const std::uint8_t> kept, std::int64_t rows,
                                   std::int64_t cols, int bits);
// One row back: q + offset at the kept positions (offset ½ on a mid-rise grid), 0 where pruned.
void decode_sparse_2_4_row(const std::int32_t* values, const std::uint8_t* indices, std::int64_t cols, int bits,
                           float offset, float* out);

// A loaded artifact: the tensors file (decompressed into memory when it is .zst) and its config.
class DeltaArtifact {
public:
  explicit DeltaArtifact(const std::filesystem::path& directory);
  // From a delta_config.json and the (decompressed) tensors file; `source` names it in errors.
  DeltaArtifact(nlohmann::json config, std::vector<std::byte> tensors, const std::string& source);
  ~DeltaArtifact();
  DeltaArtifact(const DeltaArtifact&) = delete;
  DeltaArtifact& operator=(const DeltaArtifact&) = delete;

  const nlohmann::json& config() const { return m_config; }
  const std::filesystem::path& directory() const { return m_dir; }
  // nullptr-info view when absent.
  model::TensorView find(const std::string& name) const;
  // Whether P has a compressed delta (2:4 sparse or dense).
  bool has_delta(const std::string& module) const;
  // P's Δ as stored, checked against a [rows, cols] matrix (InputError when it does not fit);
  // views into the artifact's bytes, valid while it lives.
  struct StoredDelta {
    int bits = 0;
    float offset = 0;            // ½ on a mid-rise grid
    bool sparse = true;          // 2:4 values + indices, else every value packed
    std::int64_t words = 0;      // packed int32 words per row
    std::int64_t group_size = 0; // input columns per scale
    std::int64_t groups = 0;     // scales per row
    const std::int32_t* values = nullptr;
    const std::uint8_t* indices = nullptr; // sparse only
    model::TensorView scale;               // [rows, groups]
  };
  StoredDelta stored_delta(const std::string& module, std::int64_t rows, std::int64_t cols) const;
  // Δ of P as fp32 [rows, cols]; InputError when its tensors do not fit the shape.
  std::vector<float> decode_delta(const std::string& module, std::int64_t rows, std::int64_t cols) const;

private:
  std::filesystem::path m_dir;
  nlohmann::json m_config;
  std::vector<std::byte> m_bytes;
  model::SafetensorsHeader m_header;
  std::map<std::string, const model::TensorInfo*, std::less<>> m_index;
};

// delta_config.json of an artifact folder, checked (InputError naming the file when it is not an
// optkit-delta v1 config) without reading the tensors.
nlohmann::json read_delta_config(const std::filesystem::path& directory);

// A zstd frame's content, refused (InputError naming `source`) when damaged, of unknown size or
// larger than `max_bytes`.
std::vector<std::byte> zstd_decompress(std::string_view compressed, const std::string& source, std::uint64_t max_bytes);

// The tensors file of an artifact as written (delta.safetensors), and its zstd-compressed form.
inline constexpr const char* kDeltaPlainFile = "delta.safetensors";
inline constexpr const char* kDeltaZstdFile = "delta.safetensors.zst";

// Compresses `directory`'s delta.safetensors into delta.safetensors.zst (zstd level 19, the
// content size in the frame), streamed through a few MiB of buffers, and removes the plain file.
void zstd_compress_delta_tensors(const std::filesystem::path& directory);

// A content hash of a model folder's weights: SHA-256 over each safetensors file's name and digest.
std::string weights_sha256(const std::filesystem::path& model_dir);

} // namespace optkit::quant
