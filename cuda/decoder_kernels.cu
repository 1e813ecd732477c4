#include "decoder_kernels.cuh"

#include "check.cuh"

#include <algorithm>

namespace optkit::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float
warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The sum of `v` over the block (kThreads threads).
__device__ float
block_sum(float v) {
  __shared__ float partial[kThreads / 32];
  __shared__ float total;
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0)
    partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    float s = threadIdx.x < kThreads / 32 ? partial[threadIdx.x] : 0.0f;
    s = warp_sum(s);
    if (threadIdx.x == 0)
      total = s;
  }
  __syncthreads();
  return total;
}

__global__ void
rms_norm_kernel(const float* __restrict__ x, const int* __restrict__ source, const int* __restrict__ slot,
                const float* const* __restrict__ weight, int n, float eps, float* __restrict__ out,
                __nv_bfloat16* __restrict__ gemm_in) {
  const int r = blockIdx.x;
  const float* row = x + std::size_t(source != nullptr ? source[r] : r) * n;
  const float* w = weight[slot[source != nullptr ? source[r] : r] + 1];
  float squares = 0.0f;
  for (int i = threadIdx.x; i < n; i += kThreads)
    squares += row[i] * row[i];
  const float inv = rsqrtf(block_sum(squares) / static_cast<float>(n) + eps);
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float v = row[i] * inv * w[i];
    out[std::size_t(r) * n + i] = v;
    if (gemm_in != nullptr)
      gemm_in[std::size_t(r) * n + i] = __float2bfloat16(v);
  }
}

// One warp per head of one row: q heads, then k heads, then v heads.
__global__ void
qkv_finish_kernel(float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v, DeviceRows rows,
                  int heads, QkvTables tables, float eps, const float* __restrict__ inverse_frequency, PagedKv cache) {
  const int r = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int d = cache.head_dim, half = d / 2, kv_heads = cache.kv_heads;
  const int s = rows.slot[r] + 1, position = rows.position[r];
  const int block = rows.tables[rows.table_start[r] + position / cache.block_tokens];
  for (int unit = warp; unit < heads + 2 * kv_heads; unit += blockDim.x / 32) {
    const bool is_q = unit < heads, is_k = !is_q && unit < heads + kv_heads;
    const int head = is_q ? unit : is_k ? unit - heads : unit - heads - kv_heads;
    const float* src =
        is_q ? q + (std::size_t(r) * heads + head) * d : (is_k ? k : v) + (std::size_t(r) * kv_heads + head) * d;
    const float* const* bias_table = is_q ? tables.q_bias : is_k ? tables.k_bias : tables.v_bias;
    const float* bias = bias_table != nullptr ? bias_table[s] + head * d : nullptr;
    const float* const* norm_table = is_q ? tables.q_norm : is_k ? tables.k_norm : nullptr;
    const float* norm = norm_table != nullptr ? norm_table[s] : nullptr;
    const auto value = [&](int i) { return src[i] + (bias != nullptr ? bias[i] : 0.0f); };
    float inv = 1.0f;
    if (norm != nullptr) {
      float squares = 0.0f;
      for (int i = lane; i < d; i += 32)
        squares += value(i) * value(i);
      inv = rsqrtf(warp_sum(squares) / static_cast<float>(d) + eps);
    }
    const auto normed = [&](int i) { return norm != nullptr ? value(i) * inv * norm[i] : value(i); };
    const std::size_t cached =
        ((std::size_t(block) * kv_heads + head) * cache.block_tokens + position % cache.block_tokens) * d;
    const auto store = [&](int i, float x) {
      if (is_q) {
        q[(std::size_t(r) * heads + head) * d + i] = x;
        return;
      }
      void* base = is_k ? cache.keys : cache.values;
      if (cache.bf16)
        static_cast<__nv_bfloat16*>(base)[cached + i] = __float2bfloat16(x);
      else
        static_cast<float*>(base)[cached + i] = x;
    };
    for (int i = lane; i < half; i += 32) {
      const float a = normed(i), b = normed(i + half);
      if (is_q || is_k) {
        float sin_angle, cos_angle;
        sincosf(static_cast<float>(position) * inverse_frequency[i], &sin_angle, &cos_angle);
        store(i, a * cos_angle - b * sin_angle);
        store(i + half, b * cos_angle + a * sin_angle);
      } else {
        store(i, a);
        store(i + half, b);
      }
    }
    __syncwarp();
  }
}

__global__ void
silu_multiply_kernel(float* __restrict__ gate, const float* __restrict__ up, std::int64_t n,
                     __nv_bfloat16* __restrict__ gemm_in) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    const float h = g / (1.0f + expf(-g)) * up[i];
    gate[i] = h;
    if (gemm_in != nullptr)
      gemm_in[i] = __float2bfloat16(h);
  }
}

__global__ void
add_kernel(float* __restrict__ x, const float* __restrict__ y, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    x[i] += y[i];
}

__global__ void
to_bf16_kernel(const float* __restrict__ x, __nv_bfloat16* __restrict__ out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16(x[i]);
}

unsigned
grid_for(std::int64_t n) {
  return static_cast<unsigned>(std::clamp<std::int64_t>((n + kThreads - 1) / kThreads, 1, 65535));
}

} // namespace

void
launch_rms_norm(const float* x, const int* source, const int* slot, const float* const* weight, int rows, int n,
                float eps, float* out, __nv_bfloat16* gemm_in, cudaStream_t stream) {
  if (rows == 0)
    return;
  rms_norm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, source, slot, weight, n, eps, out, gemm_in);
  check(cudaGetLastError(), "RMSNorm launch");
}

void
launch_qkv_finish(float* q, const float* k, const float* v, const DeviceRows& rows, int row_count, int heads,
                  const QkvTables& tables, float eps, const float* inverse_frequency, const PagedKv& cache,
                  cudaStream_t stream) {
  if (row_count == 0)
    return;
  qkv_finish_kernel<<<static_cast<unsigned>(row_count), 128, 0, stream>>>(q, k, v, rows, heads, tables, eps,
                                                                          inverse_frequency, cache);
  check(cudaGetLastError(), "q/k/v finish launch");
}

void
launch_silu_multiply(float* gate, const float* up, std::int64_t n, __nv_bfloat16* gemm_in, cudaStream_t stream) {
  silu_multiply_kernel<<<grid_for(n), kThreads, 0, stream>>>(gate, up, n, gemm_in);
  check(cudaGetLastError(), "SwiGLU launch");
}

void
launch_add(float* x, const float* y, std::int64_t n, cudaStream_t stream) {
  add_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, n);
  check(cudaGetLastError(), "residual add launch");
}

void
launch_to_bf16(const float* x, __nv_bfloat16* out, std::int64_t n, cudaStream_t stream) {
  to_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, out, n);
  check(cudaGetLastError(), "BF16 conversion launch");
}

} // namespace optkit::cuda
