#include "runtime/kernels.hpp"

#include <algorithm>
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
apply_rope(float* head, std::int64_t head_dim, const float* cos, const float* sin) {
  const std::int64_t half = head_dim / 2;
  for (std::int64_t i = 0; i < half; ++i) {
    const float a = head[i], b = head[i + half];
    head[i] = a * cos[i] - b * sin[i];
    head[i + half] = b * cos[i] + a * sin[i];
  }
}

void
silu_multiply(float* gate, const float* up, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void
attend(const float* query, const KvRows& cache, std::int64_t offset, std::int64_t first, std::int64_t position,
       std::int64_t head_dim, float scale, float* scores, float* out) {
  // Block by block, so the inner loops walk contiguous rows.
  const std::int64_t bt = cache.block_tokens, stride = cache.stride;
  float max_score = -INFINITY;
  for (std::int64_t block = first / bt; block <= position / bt; ++block) {
    const std::int64_t t0 = std::max(first, block * bt), t1 = std::min(position, block * bt + bt - 1);
    const float* k = cache.key_blocks[block] + (t0 - block * bt) * stride + offset;
    for (std::int64_t t = t0; t <= t1; ++t, k += stride) {
      float s = 0.0f;
      for (std::int64_t d = 0; d < head_dim; ++d)
        s += query[d] * k[d];
      scores[t] = s * scale;
      max_score = std::max(max_score, scores[t]);
    }
  }
  float total = 0.0f;
  for (std::int64_t t = first; t <= position; ++t) {
    scores[t] = std::exp(scores[t] - max_score);
    total += scores[t];
  }
  std::fill(out, out + head_dim, 0.0f);
  for (std::int64_t block = first / bt; block <= position / bt; ++block) {
    const std::int64_t t0 = std::max(first, block * bt), t1 = std::min(position, block * bt + bt - 1);
    const float* v = cache.value_blocks[block] + (t0 - block * bt) * stride + offset;
    for (std::int64_t t = t0; t <= t1; ++t, v += stride) {
      const float p = scores[t] / total;
      for (std::int64_t d = 0; d < head_dim; ++d)
        out[d] += p * v[d];
    }
  }
}

} // namespace optkit::runtime
