#include "paged_attention.cuh"

#include "check.cuh"
#include "grouped_softmax.cuh"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

namespace optkit::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMinSlice = 64;

__device__ __forceinline__ void
load8(const __nv_bfloat16* p, float (&f)[8]) {
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  const auto* h2 = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 v = __bfloat1622float2(h2[e]);
    f[2 * e] = v.x;
    f[2 * e + 1] = v.y;
  }
}

__device__ __forceinline__ void
load8(const float* p, float (&f)[8]) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(p)), b = __ldg(reinterpret_cast<const float4*>(p) + 1);
  f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}

// Block (KV head · head tile, row, split): the row's query heads of one GQA tile against the
// positions of its slice, by grouped_softmax.cuh's online softmax.
template <int HeadDim, int GroupTile, class T>
__global__ void
__launch_bounds__(32 * kWarps)
    paged_attention_partial(const float* __restrict__ q, const T* __restrict__ keys, const T* __restrict__ values,
                            DeviceRows rows, float* __restrict__ partial_acc, float* __restrict__ partial_ml, int heads,
                            int kv_heads, int block_tokens, int split_len, int window, float scale) {
  constexpr int kLanes = HeadDim / 8;
  constexpr int kPerWarp = 32 / kLanes;
  constexpr int kStates = kWarps * kPerWarp;
  constexpr int kUnroll = GroupTile == 8 ? 2 : 4; // positions a lane has in flight (registers allowing)
  const int group = heads / kv_heads, tiles = (group + GroupTile - 1) / GroupTile;
  const int kv_head = blockIdx.x / tiles, tile = blockIdx.x % tiles;
  const int r = blockIdx.y, split = blockIdx.z, splits = gridDim.z;
  const int first_head = kv_head * group + tile * GroupTile, g = min(GroupTile, group - tile * GroupTile);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, sub = lane / kLanes, part = lane % kLanes;
  const float q_scale = scale * 1.4426950408889634f;

  const int position = rows.position[r];
  const int first = window > 0 ? max(0, position - window + 1) : 0;
  const int begin = max(first, split * split_len), end = min(position + 1, (split + 1) * split_len);
  const int* table = rows.tables + rows.table_start[r];

  float qr[GroupTile][8], acc[GroupTile][8], m[GroupTile], l[GroupTile];
#pragma unroll
  for (int j = 0; j < GroupTile; ++j) {
    m[j] = -INFINITY;
    l[j] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      qr[j][e] = j < g ? q[(std::size_t(r) * heads + first_head + j) * HeadDim + part * 8 + e] * q_scale : 0.0f;
      acc[j][e] = 0.0f;
    }
  }

  const auto at = [&](int p) {
    const std::size_t block = static_cast<std::size_t>(table[p / block_tokens]);
    return ((block * kv_heads + kv_head) * block_tokens + p % block_tokens) * HeadDim + part * 8;
  };
  // Every lane runs every round (the shuffles need the whole warp); lanes past the end mask out.
  for (int round = begin + warp * kPerWarp; round < end; round += kStates * kUnroll) {
    float kf[kUnroll][8], vf[kUnroll][8];
    bool valid[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int p = round + u * kStates + sub;
      valid[u] = p < end;
      if (valid[u]) {
        const std::size_t index = at(p);
        load8(keys + index, kf[u]);
        load8(values + index, vf[u]);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e)
          kf[u][e] = vf[u][e] = 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      softmax_update<HeadDim, GroupTile>(qr, kf[u], vf[u], valid[u], g, m, l, acc);
  }

  merge_states<HeadDim, GroupTile, kStates>(m, l, acc, warp * kPerWarp + sub, part, g,
                                            std::size_t(r) * heads + first_head, splits, split, partial_acc,
                                            partial_ml);
}

// Block (row · head): merges the splits' partial softmaxes into the output.
__global__ void
paged_attention_merge(const float* __restrict__ partial_acc, const float* __restrict__ partial_ml,
                      float* __restrict__ out, int head_dim, int splits) {
  const std::size_t head_row = blockIdx.x;
  const float* ml = partial_ml + head_row * splits * 2;
  float top = -INFINITY;
  for (int s = 0; s < splits; ++s)
    top = fmaxf(top, ml[2 * s]);
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float sum = 0.0f, value = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float c = ml[2 * s] == -INFINITY ? 0.0f : __expf(ml[2 * s] - top);
      sum += ml[2 * s + 1] * c;
      value += partial_acc[(head_row * splits + s) * head_dim + d] * c;
    }
    out[head_row * head_dim + d] = value / sum;
  }
}

template <int HeadDim, int GroupTile>
void
launch_partial(const float* q, const PagedKv& cache, const DeviceRows& rows, float* acc, float* ml,
               const PagedAttentionShape& shape, const PagedAttentionPlan& plan, float scale, cudaStream_t stream) {
  const int tiles = (shape.heads / shape.kv_heads + GroupTile - 1) / GroupTile;
  const dim3 grid(static_cast<unsigned>(shape.kv_heads * tiles), static_cast<unsigned>(shape.rows),
                  static_cast<unsigned>(plan.splits));
  if (cache.bf16)
    paged_attention_partial<HeadDim, GroupTile, __nv_bfloat16><<<grid, 32 * kWarps, 0, stream>>>(
        q, static_cast<const __nv_bfloat16*>(cache.keys), static_cast<const __nv_bfloat16*>(cache.values), rows, acc,
        ml, shape.heads, shape.kv_heads, cache.block_tokens, plan.split_len, shape.sliding_window, scale);
  else
    paged_attention_partial<HeadDim, GroupTile, float><<<grid, 32 * kWarps, 0, stream>>>(
        q, static_cast<const float*>(cache.keys), static_cast<const float*>(cache.values), rows, acc, ml, shape.heads,
        shape.kv_heads, cache.block_tokens, plan.split_len, shape.sliding_window, scale);
}

template <int HeadDim>
void
launch_for_head_dim(const float* q, const PagedKv& cache, const DeviceRows& rows, float* acc, float* ml,
                    const PagedAttentionShape& shape, const PagedAttentionPlan& plan, float scale,
                    cudaStream_t stream) {
  if (plan.group_tile == 4)
    launch_partial<HeadDim, 4>(q, cache, rows, acc, ml, shape, plan, scale, stream);
  else
    launch_partial<HeadDim, 8>(q, cache, rows, acc, ml, shape, plan, scale, stream);
}

} // namespace

bool
paged_attention_supports(int head_dim, int heads, int kv_heads) {
  return (head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256) && kv_heads >= 1 &&
         heads % kv_heads == 0 && heads / kv_heads <= 8;
}

PagedAttentionPlan
plan_paged_attention(const PagedAttentionShape& shape, int multiprocessors) {
  const int group = shape.heads / shape.kv_heads;
  const int group_tile = group <= 4 ? 4 : 8;
  const int blocks = shape.kv_heads * ((group + group_tile - 1) / group_tile) * std::max(shape.rows, 1);
  // Eight blocks of four warps an SM: enough loads in flight to near the memory's bandwidth.
  const int wanted = (8 * multiprocessors + blocks - 1) / blocks;
  const int splits = std::clamp((shape.max_length + kMinSlice - 1) / kMinSlice, 1, std::max(wanted, 1));
  return {splits, (shape.max_length + splits - 1) / splits, group_tile};
}

std::size_t
paged_attention_scratch_floats(const PagedAttentionShape& shape, const PagedAttentionPlan& plan) {
  return std::size_t(shape.rows) * shape.heads * plan.splits * (shape.head_dim + 2);
}

void
launch_paged_attention(const float* q, const PagedKv& cache, const DeviceRows& rows, float* out, float* scratch,
                       const PagedAttentionShape& shape, const PagedAttentionPlan& plan, float scale,
                       cudaStream_t stream) {
  if (shape.rows == 0)
    return;
  if (shape.rows > 65535) // the grid's y dimension
    throw std::runtime_error("paged attention over " + std::to_string(shape.rows) + " rows: at most 65535 in one step");
  if (!paged_attention_supports(shape.head_dim, shape.heads, shape.kv_heads))
    throw std::runtime_error("paged attention takes head_dim 32, 64, 128 or 256 and up to 8 query heads per KV head "
                             "(got head_dim " +
                             std::to_string(shape.head_dim) + ", " + std::to_string(shape.heads) + " heads over " +
                             std::to_string(shape.kv_heads) + ")");
  float* acc = scratch;
  float* ml = scratch + std::size_t(shape.rows) * shape.heads * plan.splits * shape.head_dim;
  switch (shape.head_dim) {
  case 32:
    launch_for_head_dim<32>(q, cache, rows, acc, ml, shape, plan, scale, stream);
    break;
  case 64:
    launch_for_head_dim<64>(q, cache, rows, acc, ml, shape, plan, scale, stream);
    break;
  case 128:
    launch_for_head_dim<128>(q, cache, rows, acc, ml, shape, plan, scale, stream);
    break;
  default:
    launch_for_head_dim<256>(q, cache, rows, acc, ml, shape, plan, scale, stream);
    break;
  }
  check(cudaGetLastError(), "paged attention launch");
  paged_attention_merge<<<static_cast<unsigned>(shape.rows * shape.heads), std::min(shape.head_dim, 256), 0, stream>>>(
      acc, ml, out, shape.head_dim, plan.splits);
  check(cudaGetLastError(), "paged attention merge launch");
}

} // namespace optkit::cuda
