// ggml's tensor element types as GGUF files name them (ggml-common.h): F32, F16, BF16 and the
// block quantizations optkit reads and writes. A row of a tensor is a whole number of blocks.
// The quantizers themselves are in quant/ggml_blocks.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace optkit::model {

enum class GgmlType : std::uint32_t {
  f32 = 0,
  f16 = 1,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  bf16 = 30,
};

// Values per block and bytes per block (1 and the element size for F32 / F16 / BF16).
std::int64_t ggml_block_values(GgmlType type);
std::int64_t ggml_block_bytes(GgmlType type);
// Bytes of a row of `values` values (a multiple of the block size).
std::int64_t ggml_row_bytes(GgmlType type, std::int64_t values);
// "Q4_K", "F32", ... as ggml names them.
std::string_view ggml_type_name(GgmlType type);
// The type with that id, or none when optkit does not read it.
std::optional<GgmlType> ggml_type_from_id(std::uint32_t id);
bool ggml_is_quantized(GgmlType type);

// llama.cpp's file types optkit writes, by their general.file_type ids (llama_ftype).
enum class GgufFileType : std::uint32_t { q8_0 = 7, q4_k_s = 14, q4_k_m = 15, q5_k_s = 16, q5_k_m = 17, q6_k = 18 };
// Every one of them, largest files first: the order recipes and messages list them in.
inline constexpr std::array<GgufFileType, 6> kGgufFileTypes = {GgufFileType::q8_0,   GgufFileType::q6_k,
                                                               GgufFileType::q5_k_m, GgufFileType::q5_k_s,
                                                               GgufFileType::q4_k_m, GgufFileType::q4_k_s};

// "Q4_K_M" → q4_k_m; nullopt for another name.
std::optional<GgufFileType> parse_gguf_file_type(std::string_view name);
std::string_view gguf_file_type_name(GgufFileType type);
// The name of a general.file_type id, including those optkit reads but does not write ("F16",
// "Q4_K_S", ...), or "file type N".
std::string gguf_file_type_name(std::uint32_t id);

} // namespace optkit::model
