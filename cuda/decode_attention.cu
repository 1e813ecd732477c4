#include "decode_attention.cuh"

#include "grouped_softmax.cuh"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

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
      softmax_update<HeadDim, GroupTile>(qr, kf, vf, valid[u], g, m, l, acc);
    }
  }

  merge_states<HeadDim, GroupTile, kStates>(m, l, acc, warp * kPerWarp + sub, part, g,
                                            std::size_t(b) * heads + first_head, splits, split, partial_acc,
                                            partial_ml);
}

// The path for GQA groups of 5 to 8 heads (head_dim 64, 128 or 256), where the grouped kernel
// above spends its time in per-position shuffles and runs out of registers: each warp stages 32
// cached positions of K and V in shared memory with cp.async, then
//   scores   lane p computes position p's score for every head of the group from shared K
//            (rows padded by 16 bytes, so the lanes of a 16-byte load phase hit distinct banks);
//   softmax  one max and one rescale per head per 32 positions, not per position;
//   values   lane i accumulates dimensions [i·D/32, (i+1)·D/32) over the 32 positions from shared V.
// The query heads of the tile sit in shared memory, pre-scaled into base 2.
constexpr int kStagedGroup = 8; // query heads one staged block serves

template <int HeadDim> struct StagedConfig {
  static constexpr int kWarps = HeadDim == 256 ? 1 : HeadDim == 128 ? 2 : 4;
  static constexpr int kGroup = kStagedGroup; // heads per block at most
  static constexpr int kChunk = 32;           // positions per warp per round
  static constexpr int kPitch = HeadDim + 8;  // bf16 per staged K row
  static constexpr int kDims = HeadDim / 32;  // output dimensions per lane
  static constexpr int kKBytes = kChunk * kPitch * 2, kVBytes = kChunk * HeadDim * 2;
  static constexpr int kWarpBytes = kKBytes + kVBytes;
  static constexpr int kBytes = kWarps * kWarpBytes + kGroup * HeadDim * 4 + kWarps * kGroup * kChunk * 4;
};

__device__ __forceinline__ void
copy_16_async(void* shared, const void* global) {
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global));
}

__device__ __forceinline__ void
wait_async_copies() {
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
}

template <int HeadDim>
__global__ void
__launch_bounds__(32 * StagedConfig<HeadDim>::kWarps)
    decode_attention_partial_staged(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                                    float* __restrict__ partial_acc, float* __restrict__ partial_ml, int heads,
                                    int kv_heads, int kv_len, int split_len, float scale) {
  using C = StagedConfig<HeadDim>;
  constexpr int kG = C::kGroup, kChunk = C::kChunk, kDims = C::kDims;
  __shared__ __align__(16) unsigned char smem[C::kBytes];
  const int group = heads / kv_heads, tiles = (group + kG - 1) / kG;
  const int kv_head = blockIdx.x / tiles, tile = blockIdx.x % tiles;
  const int b = blockIdx.y, split = blockIdx.z, splits = gridDim.z;
  const int first_head = kv_head * group + tile * kG, g = min(kG, group - tile * kG);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  auto* ks = reinterpret_cast<bf16*>(smem + warp * C::kWarpBytes);
  auto* vs = reinterpret_cast<bf16*>(smem + warp * C::kWarpBytes + C::kKBytes);
  auto* qs = reinterpret_cast<float*>(smem + C::kWarps * C::kWarpBytes);
  float* ws = qs + kG * HeadDim + warp * kG * kChunk;

  const float q_scale = scale * 1.4426950408889634f;
  for (int i = threadIdx.x; i < kG * HeadDim; i += blockDim.x) {
    const int j = i / HeadDim, d = i % HeadDim;
    qs[i] = j < g ? __bfloat162float(q[(std::size_t(b) * heads + first_head + j) * HeadDim + d]) * q_scale : 0.0f;
  }
  __syncthreads();

  float m[kG], l[kG], acc[kG][kDims];
#pragma unroll
  for (int j = 0; j < kG; ++j) {
    m[j] = -INFINITY;
    l[j] = 0.0f;
#pragma unroll
    for (int e = 0; e < kDims; ++e)
      acc[j][e] = 0.0f;
  }

  const std::size_t base = (std::size_t(b) * kv_heads + kv_head) * std::size_t(kv_len) * HeadDim;
  const int begin = split * split_len, end = min(kv_len, begin + split_len);
  constexpr int kPieces = kChunk * HeadDim / 8; // 16-byte pieces of a chunk of K (and of V)
  for (int chunk = begin + warp * kChunk; chunk < end; chunk += C::kWarps * kChunk) {
    const int n = min(kChunk, end - chunk);
    for (int piece = lane; piece < kPieces; piece += 32) {
      const int p = piece / (HeadDim / 8), c = piece % (HeadDim / 8);
      if (p < n) {
        const std::size_t at = base + std::size_t(chunk + p) * HeadDim + c * 8;
        copy_16_async(ks + p * C::kPitch + c * 8, k + at);
        copy_16_async(vs + p * HeadDim + c * 8, v + at);
      }
    }
    wait_async_copies();
    __syncwarp();

    // Scores: lane = position.
    float score[kG];
#pragma unroll
    for (int j = 0; j < kG; ++j)
      score[j] = 0.0f;
    const bf16* krow = ks + lane * C::kPitch;
#pragma unroll 4
    for (int d = 0; d < HeadDim; d += 8) {
      const uint4 raw = *reinterpret_cast<const uint4*>(krow + d);
      const auto* k2 = reinterpret_cast<const __nv_bfloat162*>(&raw);
      float kf[8];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 f = __bfloat1622float2(k2[e]);
        kf[2 * e] = f.x;
        kf[2 * e + 1] = f.y;
      }
#pragma unroll
      for (int j = 0; j < kG; ++j) {
        if (j < g) {
          const float4 qa = *reinterpret_cast<const float4*>(qs + j * HeadDim + d);
          const float4 qb = *reinterpret_cast<const float4*>(qs + j * HeadDim + d + 4);
          score[j] = fmaf(qa.x, kf[0], score[j]);
          score[j] = fmaf(qa.y, kf[1], score[j]);
          score[j] = fmaf(qa.z, kf[2], score[j]);
          score[j] = fmaf(qa.w, kf[3], score[j]);
          score[j] = fmaf(qb.x, kf[4], score[j]);
          score[j] = fmaf(qb.y, kf[5], score[j]);
          score[j] = fmaf(qb.z, kf[6], score[j]);
          score[j] = fmaf(qb.w, kf[7], score[j]);
        }
      }
    }

    // Online softmax, once per head per chunk.
#pragma unroll
    for (int j = 0; j < kG; ++j) {
      if (j >= g)
        continue;
      const float s = lane < n ? score[j] : -INFINITY;
      float top = s;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1)
        top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, o));
      const float m_new = fmaxf(m[j], top);
      const float correction = m[j] == -INFINITY ? 0.0f : exp2f(m[j] - m_new);
      const float w = s == -INFINITY ? 0.0f : exp2f(s - m_new);
      l[j] = l[j] * correction + w; // per lane; summed over the warp at the end
      ws[j * kChunk + lane] = w;
#pragma unroll
      for (int e = 0; e < kDims; ++e)
        acc[j][e] *= correction;
      m[j] = m_new;
    }
    __syncwarp();

    // Values: lane = dimensions.
    for (int p = 0; p < n; ++p) {
      float vf[kDims];
      const bf16* vrow = vs + p * HeadDim + lane * kDims;
      if constexpr (kDims == 8) {
        const uint4 raw = *reinterpret_cast<const uint4*>(vrow);
        const auto* v2 = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 f = __bfloat1622float2(v2[e]);
          vf[2 * e] = f.x;
          vf[2 * e + 1] = f.y;
        }
      } else if constexpr (kDims == 4) {
        const uint2 raw = *reinterpret_cast<const uint2*>(vrow);
        const auto* v2 = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float2 f = __bfloat1622float2(v2[e]);
          vf[2 * e] = f.x;
          vf[2 * e + 1] = f.y;
        }
      } else {
        const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(vrow));
        vf[0] = f.x;
        vf[1] = f.y;
      }
#pragma unroll
      for (int j = 0; j < kG; ++j) {
        if (j < g) {
          const float w = ws[j * kChunk + p];
#pragma unroll
          for (int e = 0; e < kDims; ++e)
            acc[j][e] = fmaf(w, vf[e], acc[j][e]);
        }
      }
    }
    __syncwarp(); // the next chunk's copies overwrite ks, vs and ws
  }
#pragma unroll
  for (int j = 0; j < kG; ++j)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      l[j] += __shfl_xor_sync(0xffffffffu, l[j], o);

  // Merge the warps' partial softmaxes through shared memory (the staging area is free now).
  __syncthreads();
  auto* s_acc = reinterpret_cast<float*>(smem);   // [kWarps][kG][HeadDim]
  float* s_ml = s_acc + C::kWarps * kG * HeadDim; // [kWarps][kG][2]
#pragma unroll
  for (int j = 0; j < kG; ++j) {
#pragma unroll
    for (int e = 0; e < kDims; ++e)
      s_acc[(warp * kG + j) * HeadDim + lane * kDims + e] = acc[j][e];
    if (lane == 0) {
      s_ml[(warp * kG + j) * 2] = m[j];
      s_ml[(warp * kG + j) * 2 + 1] = l[j];
    }
  }
  __syncthreads();
  for (int index = threadIdx.x; index < g * HeadDim; index += blockDim.x) {
    const int j = index / HeadDim, d = index % HeadDim;
    float top = -INFINITY;
    for (int w = 0; w < C::kWarps; ++w)
      top = fmaxf(top, s_ml[(w * kG + j) * 2]);
    float sum = 0.0f, out = 0.0f;
    for (int w = 0; w < C::kWarps; ++w) {
      const float mw = s_ml[(w * kG + j) * 2];
      const float c = mw == -INFINITY ? 0.0f : exp2f(mw - top);
      sum += s_ml[(w * kG + j) * 2 + 1] * c;
      out += s_acc[(w * kG + j) * HeadDim + d] * c;
    }
    const std::size_t row = (std::size_t(b) * heads + first_head + j) * splits + split;
    partial_acc[row * HeadDim + d] = out;
    if (d == 0) {
      partial_ml[row * 2] = top == -INFINITY ? top : top * 0.6931471805599453f; // back to natural units
      partial_ml[row * 2 + 1] = sum;
    }
  }
}

// head_dim 64/128/256 take the grouped kernel for groups of up to 4 heads and the staged kernel
// beyond; OPTKIT_DECODE_ATTENTION=grouped|staged forces one of the two (to compare them).
DecodeKernel
decode_kernel(const DecodeAttentionShape& shape) {
  if (shape.head_dim != 64 && shape.head_dim != 128 && shape.head_dim != 256)
    return DecodeKernel::generic;
  if (const char* forced = std::getenv("OPTKIT_DECODE_ATTENTION")) {
    if (std::strcmp(forced, "grouped") == 0)
      return DecodeKernel::grouped;
    if (std::strcmp(forced, "staged") == 0)
      return DecodeKernel::staged;
  }
  return shape.heads / shape.kv_heads <= 4 ? DecodeKernel::grouped : DecodeKernel::staged;
}

int
group_tile(const DecodeAttentionShape& shape) {
  return shape.heads / shape.kv_heads <= 4 ? 4 : 8;
}

int
staged_warps(int head_dim) {
  return head_dim == 256   ? StagedConfig<256>::kWarps
         : head_dim == 128 ? StagedConfig<128>::kWarps
                           : StagedConfig<64>::kWarps;
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

template <int HeadDim>
void
launch_staged(const bf16* q, const bf16* k, const bf16* v, float* partial, float* stats,
              const DecodeAttentionShape& shape, const DecodeSplits& splits, float scale, cudaStream_t stream) {
  using C = StagedConfig<HeadDim>;
  const int group = shape.heads / shape.kv_heads;
  const dim3 grid(static_cast<unsigned>(shape.kv_heads * ((group + C::kGroup - 1) / C::kGroup)),
                  static_cast<unsigned>(shape.batch), static_cast<unsigned>(splits.splits));
  decode_attention_partial_staged<HeadDim><<<grid, 32 * C::kWarps, 0, stream>>>(
      q, k, v, partial, stats, shape.heads, shape.kv_heads, shape.kv_len, splits.split_len, scale);
}
// Calls f with the head size (64, 128 or 256) as a compile-time constant.
template <class F>
void
with_head_dim(int head_dim, F&& f) {
  if (head_dim == 64)
    f(std::integral_constant<int, 64>{});
  else if (head_dim == 128)
    f(std::integral_constant<int, 128>{});
  else
    f(std::integral_constant<int, 256>{});
}
} // namespace

DecodeSplits
plan_decode_splits(const DecodeAttentionShape& shape, int multiprocessors) {
  // Blocks before splitting: one per (query head, sequence) on the generic path, one per (KV head
  // · head tile, sequence) on the grouped and staged paths. Split until every SM holds four
  // grouped blocks (16 warps; as many warps of the staged kernel), keeping slices of at least 64
  // positions (256 on the generic path, whose blocks read more slowly).
  const DecodeKernel kernel = decode_kernel(shape); // chosen once here: the launch follows the plan
  const int group = shape.heads / shape.kv_heads;
  int blocks = shape.batch * shape.heads, wanted_warps = 2 * kDecodeWarps * multiprocessors, warps = kDecodeWarps;
  if (kernel == DecodeKernel::grouped) {
    const int tile = group_tile(shape);
    blocks = shape.batch * shape.kv_heads * ((group + tile - 1) / tile);
    wanted_warps = 4 * kDecodeWarps * multiprocessors;
  } else if (kernel == DecodeKernel::staged) {
    blocks = shape.batch * shape.kv_heads * ((group + kStagedGroup - 1) / kStagedGroup);
    wanted_warps = 4 * kDecodeWarps * multiprocessors;
    warps = staged_warps(shape.head_dim);
  }
  const int wanted = std::max(1, (wanted_warps + blocks * warps - 1) / (blocks * warps));
  const int min_slice = kernel == DecodeKernel::generic ? 256 : 64;
  const int splits = std::clamp((shape.kv_len + min_slice - 1) / min_slice, 1, wanted);
  return {splits, (shape.kv_len + splits - 1) / splits, kernel};
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
  switch (splits.kernel) {
  case DecodeKernel::grouped:
    with_head_dim(shape.head_dim, [&](auto head_dim) {
      launch_grouped<decltype(head_dim)::value>(q, k, v, partial, stats, shape, splits, scale, stream);
    });
    break;
  case DecodeKernel::staged:
    with_head_dim(shape.head_dim, [&](auto head_dim) {
      launch_staged<decltype(head_dim)::value>(q, k, v, partial, stats, shape, splits, scale, stream);
    });
    break;
  case DecodeKernel::generic:
    decode_attention_partial<<<partial_grid, 32 * kDecodeWarps, 0, stream>>>(
        q, k, v, partial, stats, shape.heads, shape.kv_heads, shape.head_dim, shape.kv_len, splits.split_len, scale);
    break;
  }
  decode_attention_combine<<<combine_grid, combine_threads, 0, stream>>>(partial, stats, out, shape.heads,
                                                                         shape.head_dim, splits.splits);
}

} // namespace optkit::cuda
