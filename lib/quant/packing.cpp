#include "quant/packing.hpp"

#include "core/error.hpp"

namespace optkit::quant {

std::int64_t
packed_words(std::int64_t cols, int bits) {
  const std::int64_t per_word = 32 / bits;
  return (cols + per_word - 1) / per_word;
}

std::vector<std::int32_t>
pack_rows(std::span<const std::int8_t> values, std::int64_t rows, std::int64_t cols, int bits) {
  if (bits < 2 || bits > 8)
    throw InputError("packing needs a bit width of 2 to 8");
  if (static_cast<std::int64_t>(values.size()) != rows * cols)
    throw InputError("pack_rows: value count does not match the shape");
  const std::int64_t words = packed_words(cols, bits), per_word = 32 / bits;
  const int offset = 1 << (bits - 1);
  std::vector<std::int32_t> out(static_cast<std::size_t>(rows * words), 0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const auto u = static_cast<std::uint32_t>(values[static_cast<std::size_t>(r * cols + c)] + offset);
      auto& word = out[static_cast<std::size_t>(r * words + c / per_word)];
      word = static_cast<std::int32_t>(static_cast<std::uint32_t>(word) |
                                       (u << static_cast<unsigned>(bits * (c % per_word))));
    }
  return out;
}

namespace {

template <typename T>
std::vector<T>
transposed(std::span<const T> values, std::int64_t rows, std::int64_t cols) {
  std::vector<T> out(values.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      out[static_cast<std::size_t>(c * rows + r)] = values[static_cast<std::size_t>(r * cols + c)];
  return out;
}

} // namespace

std::vector<std::int32_t>
pack_columns(std::span<const std::int8_t> values, std::int64_t rows, std::int64_t cols, int bits) {
  if (static_cast<std::int64_t>(values.size()) != rows * cols)
    throw InputError("pack_columns: value count does not match the shape");
  const auto packed = pack_rows(transposed(values, rows, cols), cols, rows, bits);
  return transposed(std::span<const std::int32_t>(packed), cols, packed_words(rows, bits));
}

std::vector<std::int8_t>
unpack_columns(std::span<const std::int32_t> words, std::int64_t rows, std::int64_t cols, int bits) {
  const auto word_rows = packed_words(rows, bits);
  if (static_cast<std::int64_t>(words.size()) != word_rows * cols)
    throw InputError("unpack_columns: word count does not match the shape");
  const auto values = unpack_rows(transposed(words, word_rows, cols), cols, rows, bits);
  return transposed(std::span<const std::int8_t>(values), cols, rows);
}

std::vector<std::uint8_t>
pack_fp4_rows(std::span<const std::uint8_t> codes, std::int64_t rows, std::int64_t cols) {
  if (cols % 2 != 0 || static_cast<std::int64_t>(codes.size()) != rows * cols)
    throw InputError("pack_fp4_rows: an even number of columns per row is needed");
  std::vector<std::uint8_t> out(codes.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<std::uint8_t>((codes[2 * i] & 0xf) | ((codes[2 * i + 1] & 0xf) << 4));
  return out;
}

std::vector<std::int8_t>
unpack_rows(std::span<const std::int32_t> words, std::int64_t rows, std::int64_t cols, int bits) {
  const std::int64_t per_row = packed_words(cols, bits);
  if (static_cast<std::int64_t>(words.size()) != rows * per_row)
    throw InputError("unpack_rows: word count does not match the shape");
  std::vector<std::int8_t> out(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      out[static_cast<std::size_t>(r * cols + c)] =
          static_cast<std::int8_t>(unpack_value(words.data() + r * per_row, c, bits));
  return out;
}

} // namespace optkit::quant
