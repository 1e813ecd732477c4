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

// The fast path for head_dim 64, 128 and 256: block (KV head · head tile, sequence, split) serves
// every query head of its GQA group from one read of the cache — the old path above read each
// cached row once per query head. A cached position is spread over head_dim / 8 lanes that each
// load 16 bytes of K and of V, so a warp reads 32 / (head_dim / 8) positions per load and two
// rounds of loads are in flight before their arithmetic. Scores run in base 2 (q carries
// scale · log2 e); the (max, sum) left behind are converted back to natural units for the merge.
template <int HeadDim, int GroupTile>
__global__ void
__launch_bounds__(32 * kDecodeWarps)
    decode_attention_partial_grouped(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                                     float* __restrict__ partial_acc, float* __restrict__ partial_ml, int heads,
                                     int kv_heads, int kv_len, int split_len, float scale) {
  constexpr int kLanes = HeadDim / 8;   // lanes per cached position
  constexpr int kPerWarp = 32 / kLanes; // positions one warp reads at once
  constexpr int kStates = kDecodeWarps * kPerWarp;
  constexpr int kUnroll = 2;
  const int group = heads / kv_heads, tiles = (group + GroupTile - 1) / GroupTile;
  const int kv_head = blockIdx.x / tiles, tile = blockIdx.x % tiles;
  const int b = blockIdx.y, split = blockIdx.z, splits = gridDim.z;
  const int first_head = kv_head * group + tile * GroupTile, g = min(GroupTile, group - tile * GroupTile);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, sub = lane / kLanes, part = lane % kLanes;
  const float q_scale = scale * 1.4426950408889634f;

  float qr[GroupTile][8], acc[GroupTile][8], m[GroupTile], l[GroupTile];
#pragma unroll
  for (int j = 0; j < GroupTile; ++j) {
    m[j] = -INFINITY;
    l[j] = 0.0f;
    uint4 raw = make_uint4(0, 0, 0, 0);
    if (j < g)
      raw = *reinterpret_cast<const uint4*>(q + (std::size_t(b) * heads + first_head + j) * HeadDim + part * 8);
    const auto* h2 = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __bfloat1622float2(h2[e]);
      qr[j][2 * e] = f.x * q_scale;
      qr[j][2 * e + 1] = f.y * q_scale;
    }
#pragma unroll
    for (int e = 0; e < 8; ++e)
      acc[j][e] = 0.0f;
  }

  const std::size_t base = (std::size_t(b) * kv_heads + kv_head) * std::size_t(kv_len) * HeadDim + part * 8;
  const int begin = split * split_len, end = min(kv_len, begin + split_len);
  // Every lane runs every round (the shuffles need the whole warp); lanes past the end mask out.
  for (int round = begin + warp * kPerWarp; round < end; round += kStates * kUnroll) {
    uint4 kraw[kUnroll], vraw[kUnroll];
    bool valid[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int p = round + u * kStates + sub;
      valid[u] = p < end;
      kraw[u] = valid[u] ? __ldg(reinterpret_cast<const uint4*>(k + base + std::size_t(p) * HeadDim))
                         : make_uint4(0, 0, 0, 0);
      vraw[u] = valid[u] ? __ldg(reinterpret_cast<const uint4*>(v + base + std::size_t(p) * HeadDim))
                         : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float kf[8], vf[8];
      const auto* k2 = reinterpret_cast<const __nv_bfloat162*>(&kraw[u]);
      const auto* v2 = reinterpret_cast<const __nv_bfloat162*>(&vraw[u]);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 kk = __bfloat1622float2(k2[e]), vv = __bfloat1622float2(v2[e]);
        kf[2 * e] = kk.x;
        kf[2 * e + 1] = kk.y;
        vf[2 * e] = vv.x;
        vf[2 * e + 1] = vv.y;
      }
#pragma unroll
      for (int j = 0; j < GroupTile; ++j) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e)
          dot = fmaf(qr[j][e], kf[e], dot);
#pragma unroll
        for (int o = kLanes / 2; o > 0; o >>= 1)
          dot += __shfl_xor_sync(0xffffffffu, dot, o);
        if (valid[u] && j < g) {
          const float m_new = fmaxf(m[j], dot);
          const float correction = exp2f(m[j] - m_new), weight = exp2f(dot - m_new);
          l[j] = l[j] * correction + weight;
#pragma unroll
          for (int e = 0; e < 8; ++e)
            acc[j][e] = fmaf(acc[j][e], correction, weight * vf[e]);
          m[j] = m_new;
        }
      }
    }
  }

  // Merge the kStates partial softmaxes of each head: through shared memory, then thread t
  // writes elements t, t + blockDim... of the tile's heads.
  __shared__ float s_m[kStates][GroupTile], s_l[kStates][GroupTile];
  __shared__ float s_acc[kStates][GroupTile][HeadDim];
  const int state = warp * kPerWarp + sub;
#pragma unroll
  for (int j = 0; j < GroupTile; ++j) {
    if (part == 0) {
      s_m[state][j] = m[j];
      s_l[state][j] = l[j];
    }
#pragma unroll
    for (int e = 0; e < 8; ++e)
      s_acc[state][j][part * 8 + e] = acc[j][e];
  }
  __syncthreads();
  for (int index = threadIdx.x; index < g * HeadDim; index += blockDim.x) {
    const int j = index / HeadDim, d = index % HeadDim;
    float top = -INFINITY;
    for (int st = 0; st < kStates; ++st)
      top = fmaxf(top, s_m[st][j]);
    float sum = 0.0f, out = 0.0f;
    for (int st = 0; st < kStates; ++st) {
      const float c = s_m[st][j] == -INFINITY ? 0.0f : exp2f(s_m[st][j] - top);
      sum += s_l[st][j] * c;
      out += s_acc[st][j][d] * c;
    }
    const std::size_t row = (std::size_t(b) * heads + first_head + j) * splits + split;
    partial_acc[row * HeadDim + d] = out;
    if (d == 0) {
      partial_ml[row * 2] = top == -INFINITY ? top : top * 0.6931471805599453f; // back to natural units
      partial_ml[row * 2 + 1] = sum;
    }
  }
}

bool
grouped_path(const DecodeAttentionShape& shape) {
  return shape.head_dim == 64 || shape.head_dim == 128 || shape.head_dim == 256;
}

int
group_tile(const DecodeAttentionShape& shape) {
  return shape.heads / shape.kv_heads <= 4 ? 4 : 8;
}

template <int HeadDim>
void
launch_grouped(const bf16* q, const bf16* k, const bf16* v, float* partial, float* stats,
               const DecodeAttentionShape& shape, const DecodeSplits& splits, float scale, cudaStream_t stream) {
  const int tile = group_tile(shape), group = shape.heads / shape.kv_heads;
  const dim3 grid(static_cast<unsigned>(shape.kv_heads * ((group + tile - 1) / tile)),
                  static_cast<unsigned>(shape.batch), static_cast<unsigned>(splits.splits));
  if (tile == 4)
    decode_attention_partial_grouped<HeadDim, 4><<<grid, 32 * kDecodeWarps, 0, stream>>>(
        q, k, v, partial, stats, shape.heads, shape.kv_heads, shape.kv_len, splits.split_len, scale);
  else
    decode_attention_partial_grouped<HeadDim, 8><<<grid, 32 * kDecodeWarps, 0, stream>>>(
        q, k, v, partial, stats, shape.heads, shape.kv_heads, shape.kv_len, splits.split_len, scale);
}
} // namespace

DecodeSplits
plan_decode_splits(const DecodeAttentionShape& shape, int multiprocessors) {
  // Blocks before splitting: one per (query head, sequence) on the old path, one per (KV head ·
  // head tile, sequence) on the grouped path. Split until every SM holds four blocks, keeping
  // slices of at least 64 positions (256 on the old path, whose blocks read more slowly).
  const bool grouped = grouped_path(shape);
  const int tile = grouped ? group_tile(shape) : 1, group = shape.heads / shape.kv_heads;
  const int blocks = shape.batch * (grouped ? shape.kv_heads * ((group + tile - 1) / tile) : shape.heads);
  const int wanted = std::max(1, ((grouped ? 4 : 2) * multiprocessors + blocks - 1) / blocks);
  const int min_slice = grouped ? 64 : 256;
  const int splits = std::clamp((shape.kv_len + min_slice - 1) / min_slice, 1, wanted);
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
  if (shape.head_dim == 64)
    launch_grouped<64>(q, k, v, partial, stats, shape, splits, scale, stream);
  else if (shape.head_dim == 128)
    launch_grouped<128>(q, k, v, partial, stats, shape, splits, scale, stream);
  else if (shape.head_dim == 256)
    launch_grouped<256>(q, k, v, partial, stats, shape, splits, scale, stream);
  else
    decode_attention_partial<<<partial_grid, 32 * kDecodeWarps, 0, stream>>>(
        q, k, v, partial, stats, shape.heads, shape.kv_heads, shape.head_dim, shape.kv_len, splits.split_len, scale);
  decode_attention_combine<<<combine_grid, combine_threads, 0, stream>>>(partial, stats, out, shape.heads,
                                                                         shape.head_dim, splits.splits);
}

} // namespace optkit::cuda
