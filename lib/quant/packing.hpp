// compressed-tensors' bit packing. `pack-quantized`: signed b-bit values are offset to unsigned
// (q + 2^(b-1)), and ⌊32/b⌋ of them go into one int32 little-endian within the word (column 8k+i
// of an int4 row sits at bits [4i, 4i+4); 3-bit values fill 30 bits of each word, as
// compressed-tensors' pack_to_int32 does); rows are padded with zeros to a whole word.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace optkit::quant {

// Words per row for `cols` values of `bits` bits.
std::int64_t packed_words(std::int64_t cols, int bits);

// [rows, cols] signed values → [rows, packed_words(cols, bits)] int32.
std::vector<std::int32_t> pack_rows(std::span<const std::int8_t> values, std::int64_t rows, std::int64_t cols,
                                    int bits);

// Value `col` of a packed row, as a signed integer.
inline int
unpack_value(const std::int32_t* row_words, std::int64_t col, int bits) {
  const int per_word = 32 / bits;
  const auto word = static_cast<std::uint32_t>(row_words[col / per_word]);
  const auto shift = static_cast<unsigned>(bits * static_cast<int>(col % per_word));
  const auto mask = (1u << static_cast<unsigned>(bits)) - 1u;
  return static_cast<int>((word >> shift) & mask) - (1 << (bits - 1));
}

// The same packing down the columns (compressed-tensors' packed_dim=0, how an asymmetric
// pack-quantized weight stores its zero points): [rows, cols] → [packed_words(rows, bits), cols]
// int32, word [w, c] holding rows w·⌊32/b⌋ onwards of column c.
std::vector<std::int32_t> pack_columns(std::span<const std::int8_t> values, std::int64_t rows, std::int64_t cols,
                                       int bits);
std::vector<std::int8_t> unpack_columns(std::span<const std::int32_t> words, std::int64_t rows, std::int64_t cols,
                                        int bits);

// FP4 (E2M1) codes two to a byte, as compressed-tensors' nvfp4- and mxfp4-pack-quantized store
// them: column 2i in the low nibble, 2i+1 in the high one; `cols` must be even.
std::vector<std::uint8_t> pack_fp4_rows(std::span<const std::uint8_t> codes, std::int64_t rows, std::int64_t cols);
inline std::uint8_t
unpack_fp4_code(const std::uint8_t* row_bytes, std::int64_t col) {
  return static_cast<std::uint8_t>((row_bytes[col / 2] >> (4 * (col % 2))) & 0xf);
}

std::vector<std::int8_t> unpack_rows(std::span<const std::int32_t> words, std::int64_t rows, std::int64_t cols,
                                     int bits);

} // namespace optkit::quant
