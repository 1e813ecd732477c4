#include "decode_attention.cuh"

#include <algorithm>
#include <cmath>

namespace optkit::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kDecodeWarps = 4;
constexpr int kMaxPerLane = kDecodeAttentionMaxHeadDim / 32;

// Split-KV decode attention, pass 1: block (head, sequence, split) runs an online softmax over its
// slice of the cache, one cached position per warp at a time, and leaves (max, sum, acc) behind.
// q: [batch, heads, head_dim]; k, v: [batch, kv_heads, kv_len, head_dim].
__global__ void
decode_attention_partial(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                         float* __restrict__ partial_acc, float* __restrict__ partial_ml, int heads, int kv_heads,
                         int head_dim, int kv_len, int split_len, float scale) {
  const int h = blockIdx.x, b = blockIdx.y, split = blockIdx.z, splits = gridDim.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kv_head = h / (heads / kv_heads);
  const bf16* qh = q + (std::size_t(b) * heads + h) * head_dim;
  const std::size_t base = (std::size_t(b) * kv_heads + kv_head) * std::size_t(kv_len) * head_dim;
  float qr[kMaxPerLane], acc[kMaxPerLane];
  for (int e = 0; e < kMaxPerLane; ++e) {
    const int d = lane + 32 * e;
    qr[e] = d < head_dim ? __bfloat162float(qh[d]) : 0.0f;
    acc[e] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const int begin = split * split_len, end = min(kv_len, begin + split_len);
  for (int p = begin + warp; p < end; p += kDecodeWarps) {
    const bf16* kp = k + base + std::size_t(p) * head_dim;
    const bf16* vp = v + base + std::size_t(p) * head_dim;
    float dot = 0.0f;
    for (int e = 0; e < kMaxPerLane; ++e) {
      const int d = lane + 32 * e;
      if (d < head_dim)
        dot += qr[e] * __bfloat162float(kp[d]);
    }
    for (int o = 16; o > 0; o >>= 1)
      dot += __shfl_xor_sync(0xffffffffu, dot, o);
    const float s = dot * scale, m_new = fmaxf(m, s);
    const float correction = __expf(m - m_new), weight = __expf(s - m_new);
    l = l * correction + weight;
    for (int e = 0; e < kMaxPerLane; ++e) {
      const int d = lane + 32 * e;
      acc[e] = acc[e] * correction + (d < head_dim ? weight * __bfloat162float(vp[d]) : 0.0f);
    }
    m = m_new;
  }
  __shared__ float s_m[kDecodeWarps], s_l[kDecodeWarps], s_acc[kDecodeWarps][32 * kMaxPerLane];
  if (lane == 0) {
    s_m[warp] = m;
    s_l[warp] = l;
  }
  for (int e = 0; e < kMaxPerLane; ++e)
    s_acc[warp][lane + 32 * e] = acc[e];
  __syncthreads();
  if (warp != 0)
    return;
  float top = -INFINITY;
  for (int w = 0; w < kDecodeWarps; ++w)
    top = fmaxf(top, s_m[w]);
  float sum = 0.0f, out[kMaxPerLane] = {};
  for (int w = 0; w < kDecodeWarps; ++w) {
    const float c = s_m[w] == -INFINITY ? 0.0f : __expf(s_m[w] - top);
    sum += s_l[w] * c;
    for (int e = 0; e < kMaxPerLane; ++e)
      out[e] += s_acc[w][lane + 32 * e] * c;
  }
  const std::size_t row = (std::size_t(b) * heads + h) * splits + split;
  for (int e = 0; e < kMaxPerLane; ++e) {
    const int d = lane + 32 * e;
    if (d < head_dim)
      partial_acc[row * head_dim + d] = out[e];
  }
  if (lane == 0) {
    partial_ml[row * 2] = top;
    partial_ml[row * 2 + 1] = sum;
  }
}

// Pass 2: block (head, sequence) merges its splits; thread d writes output element d.
__global__ void
decode_attention_combine(const float* __restrict__ partial_acc, const float* __restrict__ partial_ml,
                         bf16* __restrict__ out, int heads, int head_dim, int splits) {
  const int h = blockIdx.x, b = blockIdx.y, d = threadIdx.x;
  if (d >= head_dim)
    return;
  const std::size_t first = (std::size_t(b) * heads + h) * splits;
  float top = -INFINITY;
  for (int s = 0; s < splits; ++s)
    top = fmaxf(top, partial_ml[(first + s) * 2]);
  float sum = 0.0f, acc = 0.0f;
  for (int s = 0; s < splits; ++s) {
    const float m = partial_ml[(first + s) * 2];
    const float c = m == -INFINITY ? 0.0f : __expf(m - top);
    sum += partial_ml[(first + s) * 2 + 1] * c;
    acc += partial_acc[(first + s) * head_dim + d] * c;
  }
  out[(std::size_t(b) * heads + h) * head_dim + d] = __float2bfloat16(sum > 0.0f ? acc / sum : 0.0f);
}

} // namespace

DecodeSplits
plan_decode_splits(const DecodeAttentionShape& shape, int multiprocessors) {
  const int blocks = shape.batch * shape.heads;
  const int wanted = std::max(1, (2 * multiprocessors + blocks - 1) / blocks);
  const int splits = std::clamp((shape.kv_len + 255) / 256, 1, wanted);
  return {splits, (shape.kv_len + splits - 1) / splits};
}

std::size_t
decode_attention_partial_floats(const DecodeAttentionShape& shape, const DecodeSplits& splits) {
  return std::size_t(shape.batch) * shape.heads * splits.splits * shape.head_dim;
}

std::size_t
decode_attention_stats_floats(const DecodeAttentionShape& shape, const DecodeSplits& splits) {
  return std::size_t(shape.batch) * shape.heads * splits.splits * 2;
}

void
launch_decode_attention(const bf16* q, const bf16* k, const bf16* v, bf16* out, float* partial, float* stats,
                        const DecodeAttentionShape& shape, const DecodeSplits& splits, float scale,
                        cudaStream_t stream) {
  const dim3 partial_grid(static_cast<unsigned>(shape.heads), static_cast<unsigned>(shape.batch),
                          static_cast<unsigned>(splits.splits));
  const dim3 combine_grid(static_cast<unsigned>(shape.heads), static_cast<unsigned>(shape.batch));
  const unsigned combine_threads = static_cast<unsigned>((shape.head_dim + 31) / 32 * 32);
  decode_attention_partial<<<partial_grid, 32 * kDecodeWarps, 0, stream>>>(
      q, k, v, partial, stats, shape.heads, shape.kv_heads, shape.head_dim, shape.kv_len, splits.split_len, scale);
  decode_attention_combine<<<combine_grid, combine_threads, 0, stream>>>(partial, stats, out, shape.heads,
                                                                         shape.head_dim, splits.splits);
}

} // namespace optkit::cuda
