// Packed integer weights (compressed-tensors' pack-quantized: 2-, 4- or 8-bit values in int32
// words, a scale per group of columns) dequantize row by row to exactly quant's unpacked value
// times its group's scale: the word-by-word paths (4 and 8 bits, groups a multiple of a word's
// values) and the general one, on rows that end mid-word and groups that end mid-row.
#include "quant/packing.hpp"
#include "runtime/quantized_weight.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <vector>

using namespace optkit;
using namespace optkit::runtime;

TEST_CASE("packed int2/int4/int8 rows equal the unpacked values times their group's scale, bit for bit") {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> scale(0.001f, 0.1f);
  for (const int bits : {2, 4, 8})
    for (const std::int64_t cols : {8, 12, 100, 128, 300})
      for (const std::int64_t group : {std::int64_t{4}, std::int64_t{8}, std::int64_t{20}, std::int64_t{32}, cols}) {
        const std::int64_t rows = 3, groups = (cols + group - 1) / group;
        const int low = -(1 << (bits - 1)), high = (1 << (bits - 1)) - 1;
        std::uniform_int_distribution<int> value(low, high);
        std::vector<std::int8_t> values(static_cast<std::size_t>(rows * cols));
        for (auto& v : values)
          v = static_cast<std::int8_t>(value(rng));
        const auto words = quant::pack_rows(values, rows, cols, bits);
        std::vector<std::byte> bytes(words.size() * 4);
        std::memcpy(bytes.data(), words.data(), bytes.size());
        std::vector<float> scales(static_cast<std::size_t>(rows * groups));
        for (auto& s : scales)
          s = scale(rng);
        QuantizedWeightSpec spec;
        spec.storage = QuantizedStorage::packed_int32;
        spec.rows = rows;
        spec.cols = cols;
        spec.bits = bits;
        spec.values = bytes;
        spec.scales = scales;
        spec.group_size = group;
        const auto weight = make_quantized_weight(spec);
        std::vector<float> row(static_cast<std::size_t>(cols));
        std::int64_t mismatches = 0;
        for (std::int64_t r = 0; r < rows; ++r) {
          weight->row(r, row.data());
          for (std::int64_t c = 0; c < cols; ++c)
            mismatches +=
                row[static_cast<std::size_t>(c)] != static_cast<float>(values[static_cast<std::size_t>(r * cols + c)]) *
                                                        scales[static_cast<std::size_t>(r * groups + c / group)];
        }
        CAPTURE(bits);
        CAPTURE(cols);
        CAPTURE(group);
        CHECK(mismatches == 0);
      }
}

TEST_CASE("asymmetric packed rows are (q − z)·s with the zero points packed down the columns") {
  // compressed-tensors' packed_dim=0: word [w, g] holds rows 8w .. 8w+7 of group g, offset by 8.
  const std::vector<std::int8_t> zeros = {-8, -1, 0, 7, 3, -3, 1, 2, 5}; // 9 rows x 1 group
  const auto words = quant::pack_columns(zeros, 9, 1, 4);
  REQUIRE(words.size() == 2);
  CHECK(static_cast<std::uint32_t>(words[0]) == 0xA95BF870u);
  CHECK(words[1] == 13);
  CHECK(quant::unpack_columns(words, 9, 1, 4) == zeros);
  const std::int64_t rows = 2, cols = 16, group = 8;
  std::vector<std::int8_t> values(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<std::int8_t>(static_cast<int>(i % 16) - 8);
  const auto packed = quant::pack_rows(values, rows, cols, 4);
  std::vector<std::byte> bytes(packed.size() * 4);
  std::memcpy(bytes.data(), packed.data(), bytes.size());
  QuantizedWeightSpec spec;
  spec.storage = QuantizedStorage::packed_int32;
  spec.rows = rows;
  spec.cols = cols;
  spec.bits = 4;
  spec.values = bytes;
  spec.scales = {0.5f, 0.25f, 2.0f, 1.0f};
  spec.zeros = {-8.0f, 0.0f, 3.0f, 7.0f};
  spec.group_size = group;
  const auto weight = make_quantized_weight(spec);
  CHECK(weight->format() == "int4 g8 asymmetric");
  std::vector<float> row(static_cast<std::size_t>(cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    weight->row(r, row.data());
    for (std::int64_t c = 0; c < cols; ++c) {
      const auto at = static_cast<std::size_t>(r * 2 + c / group);
      CHECK(row[static_cast<std::size_t>(c)] ==
            (static_cast<float>(values[static_cast<std::size_t>(r * cols + c)]) - spec.zeros[at]) * spec.scales[at]);
    }
  }
}
