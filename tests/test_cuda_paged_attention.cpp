// Paged attention on a CUDA device (cuda/paged_attention.cuh) against a float64 CPU reference:
// rows of several sequences at different positions in one launch (a prefill chunk's rows and
// decode rows), block tables shuffled over the cache, a sliding window, every head size and GQA
// group tile it takes, BF16 and fp32 caches, one split and many. Without a device ctest reports
// this file as skipped (SKIPPED: below).
#include "cuda/device_array.cuh"
#include "cuda/paged_attention.cuh"

#include "doctor/gpu_probe.hpp"

#include <doctest/doctest.h>

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

using namespace optkit;

namespace {

struct Case {
  int heads, kv_heads, head_dim, block_tokens, window;
  bool bf16;
  std::vector<int> lengths; // per sequence
};

std::size_t
at(std::int64_t i) {
  return static_cast<std::size_t>(i);
}

float
round_bf16(float x) {
  return __bfloat162float(__float2bfloat16(x));
}

// Worst |gpu − reference| over the case's outputs, each row of sequence s at positions
// [length − 3, length) (a chunk of three rows, fewer for short sequences).
double
worst_error(const Case& c, std::mt19937& rng) {
  const int sequences = static_cast<int>(c.lengths.size());
  std::vector<int> tables, table_start_of(static_cast<std::size_t>(sequences));
  int blocks = 0;
  for (int s = 0; s < sequences; ++s) {
    table_start_of[static_cast<std::size_t>(s)] = static_cast<int>(tables.size());
    const int n = (c.lengths[static_cast<std::size_t>(s)] + c.block_tokens - 1) / c.block_tokens;
    for (int b = 0; b < n; ++b)
      tables.push_back(blocks++);
  }
  std::shuffle(tables.begin(), tables.end(), rng); // blocks scattered over the cache
  const std::size_t per_block = at(std::int64_t(c.kv_heads) * c.block_tokens * c.head_dim);
  std::normal_distribution<float> normal;
  std::vector<float> keys(per_block * at(blocks)), values(per_block * at(blocks));
  for (auto* v : {&keys, &values})
    for (auto& x : *v)
      x = c.bf16 ? round_bf16(normal(rng)) : normal(rng);
  std::vector<int> slot, position, table_start;
  for (int s = 0; s < sequences; ++s)
    for (int p = std::max(0, c.lengths[static_cast<std::size_t>(s)] - 3); p < c.lengths[static_cast<std::size_t>(s)];
         ++p) {
      slot.push_back(-1);
      position.push_back(p);
      table_start.push_back(table_start_of[static_cast<std::size_t>(s)]);
    }
  const int rows = static_cast<int>(position.size());
  std::vector<float> q(at(std::int64_t(rows) * c.heads * c.head_dim));
  for (auto& x : q)
    x = normal(rng);

  const auto element = [&](const std::vector<float>& cache, int row, int kv_head, int p, int d) {
    const int block = tables[at(table_start[at(row)] + p / c.block_tokens)];
    return double(cache[at(
        ((std::int64_t(block) * c.kv_heads + kv_head) * c.block_tokens + p % c.block_tokens) * c.head_dim + d)]);
  };
  const double scale = 1.0 / std::sqrt(double(c.head_dim));
  std::vector<double> expected(q.size());
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < c.heads; ++h) {
      const int kv_head = h / (c.heads / c.kv_heads), pos = position[static_cast<std::size_t>(r)];
      const int first = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
      const float* qh = q.data() + (std::int64_t(r) * c.heads + h) * c.head_dim;
      std::vector<double> scores;
      for (int p = first; p <= pos; ++p) {
        double dot = 0;
        for (int d = 0; d < c.head_dim; ++d)
          dot += double(qh[d]) * element(keys, r, kv_head, p, d);
        scores.push_back(dot * scale);
      }
      const double top = *std::max_element(scores.begin(), scores.end());
      double sum = 0;
      for (auto& s : scores)
        sum += (s = std::exp(s - top));
      for (int d = 0; d < c.head_dim; ++d) {
        double out = 0;
        for (int p = first; p <= pos; ++p)
          out += scores[static_cast<std::size_t>(p - first)] * element(values, r, kv_head, p, d);
        expected[at((std::int64_t(r) * c.heads + h) * c.head_dim + d)] = out / sum;
      }
    }

  // The device: its cache in the element type, the rows' metadata, one launch.
  const auto upload_cache = [&](const std::vector<float>& host, cuda::DeviceArray<unsigned char>& device) {
    if (c.bf16) {
      std::vector<__nv_bfloat16> b(host.size());
      std::transform(host.begin(), host.end(), b.begin(), [](float x) { return __float2bfloat16(x); });
      device.upload(reinterpret_cast<const unsigned char*>(b.data()), b.size() * 2);
    } else {
      device.upload(reinterpret_cast<const unsigned char*>(host.data()), host.size() * 4);
    }
  };
  cuda::DeviceArray<unsigned char> device_keys, device_values;
  upload_cache(keys, device_keys);
  upload_cache(values, device_values);
  std::vector<int> meta = slot;
  meta.insert(meta.end(), position.begin(), position.end());
  meta.insert(meta.end(), table_start.begin(), table_start.end());
  meta.insert(meta.end(), tables.begin(), tables.end());
  cuda::DeviceArray<int> device_meta;
  device_meta.upload(meta.data(), meta.size());
  cuda::DeviceArray<float> device_q, device_out, scratch;
  device_q.upload(q.data(), q.size());
  device_out.reserve(q.size());
  const int max_length = *std::max_element(position.begin(), position.end()) + 1;
  const cuda::PagedAttentionShape shape{rows, c.heads, c.kv_heads, c.head_dim, max_length, c.window};
  for (const int multiprocessors : {1, 132}) { // one split per row, then many
    const cuda::PagedAttentionPlan plan = cuda::plan_paged_attention(shape, multiprocessors);
    scratch.reserve(cuda::paged_attention_scratch_floats(shape, plan));
    const cuda::PagedKv cache{device_keys.data, device_values.data, c.bf16, c.kv_heads, c.head_dim, c.block_tokens};
    const int* m = device_meta.data;
    const cuda::DeviceRows device_rows{m, m + rows, m + 2 * rows, m + 3 * rows};
    cuda::check(cudaDeviceSynchronize(), "uploads");
    cuda::launch_paged_attention(device_q.data, cache, device_rows, device_out.data, scratch.data, shape, plan,
                                 static_cast<float>(scale), nullptr);
    cuda::check(cudaDeviceSynchronize(), "paged attention");
    std::vector<float> got(q.size());
    cuda::check(cudaMemcpy(got.data(), device_out.data, got.size() * 4, cudaMemcpyDeviceToHost), "download");
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::fabs(double(got[i]) - expected[i]));
    if (multiprocessors == 132)
      return worst;
    REQUIRE(worst < (c.bf16 ? 2e-3 : 2e-5));
  }
  return 0;
}

} // namespace

TEST_CASE("paged attention equals a float64 reference over shuffled block tables, chunks and decode rows") {
  const doctor::GpuProbe probe = doctor::probe_gpus();
  if (probe.devices.empty()) {
    MESSAGE("SKIPPED: no CUDA device: " << probe.error);
    return;
  }
  std::mt19937 rng(3);
  const Case cases[] = {
      {6, 2, 32, 16, 0, false, {6, 37, 3, 70}}, // tiny-base's shape, fp32 cache
      {6, 2, 32, 16, 0, true, {6, 37, 3, 70}},  // and BF16
      {32, 8, 128, 16, 0, true, {1, 300, 129}}, // Llama-3.1-8B: group 4
      {32, 8, 64, 16, 0, true, {2, 200}},       // Llama-3.2-1B: head_dim 64
      {28, 4, 128, 16, 0, true, {100, 17}},     // Qwen2.5-7B: group 7, tile 8
      {8, 1, 256, 8, 0, true, {90, 33}},        // head_dim 256, group 8
      {16, 16, 64, 16, 0, false, {50, 1}},      // MHA: group 1
      {8, 2, 64, 16, 24, true, {100, 20, 60}},  // a sliding window of 24
      {12, 4, 32, 4, 0, false, {513, 2}},       // small blocks, many splits
  };
  for (const Case& c : cases) {
    CAPTURE(c.heads);
    CAPTURE(c.head_dim);
    CAPTURE(c.bf16);
    const double worst = worst_error(c, rng);
    MESSAGE("heads " << c.heads << "/" << c.kv_heads << " head_dim " << c.head_dim << (c.bf16 ? " bf16" : " fp32")
                     << ": max |gpu - float64| = " << worst);
    CHECK(worst < (c.bf16 ? 2e-3 : 2e-5));
  }
}
