// A compressed Δ with random codes and scales, in the delta artifact's format (2:4 sparse or
// dense, 2/4/8-bit, `groups` scales per row), held in memory as a DeltaArtifact of one module "m".
// With `odd_nibbles`, two bytes of kept positions name one column twice and columns in falling
// order, as a corrupted file could (the first row of a 2:4 Δ of 56 or more columns).
#pragma once

#include "model/safetensors_writer.hpp"
#include "quant/delta_format.hpp"
#include "quant/packing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <vector>

#include <unistd.h>

namespace optkit::test {

inline std::unique_ptr<quant::DeltaArtifact>
random_delta_artifact(std::int64_t rows, std::int64_t cols, int bits, bool sparse, std::int64_t groups,
                      std::uint32_t seed, bool odd_nibbles = false) {
  std::mt19937 rng(seed);
  const int top = 1 << (bits - 1);
  std::uniform_int_distribution<int> code(-top, top - 1), pick(0, 5);
  model::TensorSet set;
  if (sparse) {
    std::vector<float> q(static_cast<std::size_t>(rows * cols));
    std::vector<std::uint8_t> kept(q.size());
    static const int pairs[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
    for (std::int64_t g = 0; g < rows * cols / 4; ++g) {
      const auto* p = pairs[pick(rng)];
      for (int j = 0; j < 2; ++j) {
        const auto at = static_cast<std::size_t>(g * 4 + p[j]);
        kept[at] = 1;
        q[at] = static_cast<float>(code(rng));
      }
    }
    auto enc = quant::encode_sparse_2_4(q, kept, rows, cols, bits);
    if (odd_nibbles) {
      enc.indices.at(1) = 0x5a; // groups 2 and 3: columns 2 and 2, then 1 and 1
      enc.indices.at(6) = 0x1e; // groups 12 and 13: columns 2 then 3, then 1 then 0
    }
    set.add_values("m.delta_values", model::DType::i32, {rows, static_cast<std::int64_t>(enc.values.size()) / rows},
                   enc.values);
    set.add_values("m.delta_indices", model::DType::u8, {rows, cols / 8}, enc.indices);
  } else {
    std::vector<std::int8_t> q(static_cast<std::size_t>(rows * cols));
    for (auto& v : q)
      v = static_cast<std::int8_t>(code(rng));
    const auto words = quant::pack_rows(q, rows, cols, bits);
    set.add_values("m.delta_packed", model::DType::i32, {rows, quant::packed_words(cols, bits)}, words);
  }
  std::uniform_real_distribution<float> scale(1e-4f, 1e-3f);
  std::vector<float> scales(static_cast<std::size_t>(rows * groups));
  for (auto& s : scales)
    s = scale(rng);
  set.add_values("m.delta_scale", model::DType::f32, {rows, groups}, scales);
  const auto path =
      std::filesystem::temp_directory_path() / fmt::format("optkit_random_delta_{}_{}.safetensors", ::getpid(), seed);
  model::write_safetensors(path, set.tensors());
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  std::vector<std::byte> bytes(raw.size());
  std::transform(raw.begin(), raw.end(), bytes.begin(), [](char c) { return static_cast<std::byte>(c); });
  const nlohmann::json config = {{"format", "optkit-delta"},
                                 {"version", 1},
                                 {"bits", bits},
                                 {"levels", "midrise"},
                                 {"base", nlohmann::json::object()}};
  return std::make_unique<quant::DeltaArtifact>(config, std::move(bytes), fmt::format("random delta {}", seed));
}

} // namespace optkit::test
