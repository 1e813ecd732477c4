#include "runtime/kernels.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace optkit::runtime {

void
rms_norm(const float* x, const float* weight, std::int64_t n, float eps, float* out) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  const float inv = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
  for (std::int64_t i = 0; i < n; ++i)
    out[i] = x[i] * inv * weight[i];
}

void
apply_rope(float* head, std::int64_t rotated, const float* cos, const float* sin) {
  const std::int64_t half = rotated / 2;
  for (std::int64_t i = 0; i < half; ++i) {
    const float a = head[i], b = head[i + half];
    head[i] = a * cos[i] - b * sin[i];
    head[i + half] = b * cos[i] + a * sin[i];
  }
}

void
silu_multiply_loops(float* gate, const float* up, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void
gelu_tanh_multiply(float* gate, const float* up, std::int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * up[i];
  }
}

void
gated_activation(model::Activation activation, float* gate, const float* up, std::int64_t n) {
  if (activation == model::Activation::gelu_tanh)
    gelu_tanh_multiply(gate, up, n);
  else
    silu_multiply(gate, up, n);
}

void
scale_embeddings(std::span<float> x, float multiplier) {
  if (multiplier != 1.0f)
    for (auto& v : x)
      v *= multiplier;
}

void
soft_cap(float* x, std::int64_t n, float cap) {
  for (std::int64_t i = 0; i < n; ++i)
    x[i] = cap * std::tanh(x[i] / cap);
}

namespace {

// Σ a[d]·b[d] in eight interleaved partial sums: one serial chain of adds would make each score
// wait head_dim additions' latency; these the compiler keeps in vector registers.
float
dot(const float* a, const float* b, std::int64_t n) {
  constexpr std::int64_t kLanes = 8;
  std::array<float, kLanes> part{};
  std::int64_t d = 0;
  for (; d + kLanes <= n; d += kLanes)
    for (std::int64_t j = 0; j < kLanes; ++j)
      part[static_cast<std::size_t>(j)] += a[d + j] * b[d + j];
  for (; d < n; ++d)
    part[0] += a[d] * b[d];
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

} // namespace

void
attend_loops(const float* queries, std::int64_t heads, const KvRows& cache, std::int64_t offset, std::int64_t first,
             std::int64_t position, std::int64_t head_dim, AttentionScores scoring, float* scratch, float* out) {
  // Block by block, so the inner loops walk contiguous rows; each key and value row is read once
  // for all the heads that share it.
  const std::int64_t bt = cache.block_tokens, stride = cache.stride, span = position + 1;
  float* const max_score = scratch + heads * span;
  float* const total = max_score + heads;
  std::fill(max_score, max_score + heads, -INFINITY);
  for (std::int64_t block = first / bt; block <= position / bt; ++block) {
    const auto keys = cache.run(cache.key_blocks, block, first, position, offset);
    const float* k = keys.row;
    for (std::int64_t t = keys.first; t <= keys.last; ++t, k += stride)
      for (std::int64_t h = 0; h < heads; ++h) {
        float& score = scratch[h * span + t];
        score = dot(queries + h * head_dim, k, head_dim) * scoring.scale;
        if (scoring.softcap > 0)
          score = scoring.softcap * std::tanh(score / scoring.softcap);
        max_score[h] = std::max(max_score[h], score);
      }
  }
  for (std::int64_t h = 0; h < heads; ++h) {
    float* scores = scratch + h * span;
    total[h] = 0.0f;
    for (std::int64_t t = first; t <= position; ++t) {
      scores[t] = std::exp(scores[t] - max_score[h]);
      total[h] += scores[t];
    }
  }
  std::fill(out, out + heads * head_dim, 0.0f);
  for (std::int64_t block = first / bt; block <= position / bt; ++block) {
    const auto values = cache.run(cache.value_blocks, block, first, position, offset);
    const float* v = values.row;
    for (std::int64_t t = values.first; t <= values.last; ++t, v += stride)
      for (std::int64_t h = 0; h < heads; ++h) {
        const float p = scratch[h * span + t] / total[h];
        float* o = out + h * head_dim;
        for (std::int64_t d = 0; d < head_dim; ++d)
          o[d] += p * v[d];
      }
  }
}

} // namespace optkit::runtime
