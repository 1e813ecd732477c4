// The attention and SiLU kernels (AVX-512 where the CPU has it, the plain loops elsewhere and under
// OPTKIT_CPU_BASELINE=1) against float64 references: attention over a paged cache with blocks and
// head sizes that leave tails in every loop, windows, soft-capping and grouped heads; SiLU over
// the whole float range, its saturating ends and non-finite inputs.
#include "runtime/kernels.hpp"

#include <algorithm>
#include <cmath>
#include <doctest/doctest.h>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace optkit::runtime;

namespace {

struct PagedRows {
  std::vector<std::vector<float>> key_storage, value_storage;
  std::vector<float*> key_blocks, value_blocks;
  KvRows rows;
};

PagedRows
random_cache(std::int64_t positions, std::int64_t block_tokens, std::int64_t stride, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  PagedRows cache;
  const std::int64_t blocks = (positions + block_tokens - 1) / block_tokens;
  for (std::int64_t b = 0; b < blocks; ++b) {
    for (auto* storage : {&cache.key_storage, &cache.value_storage}) {
      storage->emplace_back(static_cast<std::size_t>(block_tokens * stride));
      for (auto& v : storage->back())
        v = normal(rng);
    }
  }
  for (std::int64_t b = 0; b < blocks; ++b) {
    cache.key_blocks.push_back(cache.key_storage[static_cast<std::size_t>(b)].data());
    cache.value_blocks.push_back(cache.value_storage[static_cast<std::size_t>(b)].data());
  }
  cache.rows = KvRows{cache.key_blocks.data(), cache.value_blocks.data(), block_tokens, stride};
  return cache;
}

// softmax(q·k·scale, soft-capped) · V in float64, one head at a time.
std::vector<double>
reference_attention(const std::vector<float>& queries, std::int64_t heads, const KvRows& cache, std::int64_t offset,
                    std::int64_t first, std::int64_t position, std::int64_t head_dim, AttentionScores scoring) {
  std::vector<double> out(static_cast<std::size_t>(heads * head_dim), 0.0);
  for (std::int64_t h = 0; h < heads; ++h) {
    std::vector<double> weights;
    for (std::int64_t t = first; t <= position; ++t) {
      double s = 0;
      for (std::int64_t d = 0; d < head_dim; ++d)
        s += static_cast<double>(queries[static_cast<std::size_t>(h * head_dim + d)]) *
             static_cast<double>(cache.key(t)[offset + d]);
      s *= static_cast<double>(scoring.scale);
      const double cap = scoring.softcap;
      if (cap > 0)
        s = cap * std::tanh(s / cap);
      weights.push_back(s);
    }
    const double max = *std::max_element(weights.begin(), weights.end());
    double total = 0;
    for (auto& w : weights)
      total += (w = std::exp(w - max));
    for (std::int64_t t = first; t <= position; ++t)
      for (std::int64_t d = 0; d < head_dim; ++d)
        out[static_cast<std::size_t>(h * head_dim + d)] +=
            weights[static_cast<std::size_t>(t - first)] / total * static_cast<double>(cache.value(t)[offset + d]);
  }
  return out;
}

} // namespace

TEST_CASE("attend and attend_loops equal a float64 softmax(QK^T)V on every tail") {
  const std::string kernel = attention_kernel();
  CAPTURE(kernel);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const std::int64_t head_dim : {8, 40, 47, 64, 72, 128})
    for (const std::int64_t heads : {1, 3, 4})
      for (const std::int64_t block_tokens : {7, 16})
        for (const std::int64_t position : {0, 1, 15, 16, 17, 40, 62, 130})
          for (const bool windowed : {false, true})
            for (const float softcap : {0.0f, 5.0f}) {
              CAPTURE(head_dim);
              CAPTURE(heads);
              CAPTURE(block_tokens);
              CAPTURE(position);
              CAPTURE(windowed);
              CAPTURE(softcap);
              const std::int64_t offset = head_dim, stride = 3 * head_dim; // the second of three KV heads
              const PagedRows cache = random_cache(position + 1, block_tokens, stride, rng);
              const std::int64_t first = windowed ? position / 3 : 0;
              std::vector<float> queries(static_cast<std::size_t>(heads * head_dim));
              for (auto& v : queries)
                v = 2.0f * normal(rng); // scores of a few units: a peaked softmax, as trained models have
              const AttentionScores scoring{.scale = 1.0f / std::sqrt(static_cast<float>(head_dim)),
                                            .softcap = softcap};
              const auto expected =
                  reference_attention(queries, heads, cache.rows, offset, first, position, head_dim, scoring);
              std::vector<float> scratch(static_cast<std::size_t>(heads * (position + 3)));
              std::vector<float> out(expected.size(), NAN), out_loops(expected.size(), NAN);
              attend(queries.data(), heads, cache.rows, offset, first, position, head_dim, scoring, scratch.data(),
                     out.data());
              attend_loops(queries.data(), heads, cache.rows, offset, first, position, head_dim, scoring,
                           scratch.data(), out_loops.data());
              for (std::size_t i = 0; i < expected.size(); ++i) {
                CAPTURE(i);
                CHECK(std::abs(static_cast<double>(out[i]) - expected[i]) <= 2e-6);
                CHECK(std::abs(static_cast<double>(out_loops[i]) - expected[i]) <= 2e-6);
              }
            }
}

TEST_CASE("silu_multiply equals g·sigmoid(g)·u in float64, to a few ulp, over the float range") {
  const std::string kernel = attention_kernel();
  CAPTURE(kernel);
  std::vector<float> gate, up;
  for (float g = -120.0f; g <= 120.0f; g += 0.0137f) {
    gate.push_back(g);
    up.push_back(1.0f + 0.25f * std::sin(g));
  }
  for (const float special : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.0f, 89.5f, -87.5f, -104.5f, 1e30f, -1e30f}) {
    gate.push_back(special);
    up.push_back(0.5f);
  }
  auto silu = gate;
  silu_multiply(silu.data(), up.data(), static_cast<std::int64_t>(silu.size()));
  auto silu_loops = gate;
  silu_multiply_loops(silu_loops.data(), up.data(), static_cast<std::int64_t>(silu_loops.size()));
  for (std::size_t i = 0; i < gate.size(); ++i) {
    CAPTURE(gate[i]);
    const double g = gate[i];
    const double expected = g / (1.0 + std::exp(-g)) * static_cast<double>(up[i]);
    // Past g ≈ -88.7, e^-g overflows float and both paths give -0 for results below 1e-36.
    const double tolerance = 1e-6 * std::abs(expected) + 1e-36;
    CHECK(std::abs(static_cast<double>(silu[i]) - expected) <= tolerance);
    CHECK(std::abs(static_cast<double>(silu_loops[i]) - expected) <= tolerance);
  }
  // Non-finite gates: +inf passes (inf·sigmoid(inf)), NaN stays NaN, in both paths.
  std::vector<float> odd{INFINITY, NAN}, one{1.0f, 1.0f};
  auto odd_loops = odd;
  silu_multiply(odd.data(), one.data(), 2);
  silu_multiply_loops(odd_loops.data(), one.data(), 2);
  CHECK(odd[0] == INFINITY);
  CHECK(odd_loops[0] == INFINITY);
  CHECK(std::isnan(odd[1]));
  CHECK(std::isnan(odd_loops[1]));
}
