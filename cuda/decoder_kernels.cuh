// The element-wise steps of a decoder layer on a device (DeviceDecoder): RMSNorm, the q/k/v
// finish (bias, q/k norm, RoPE, keys and values into the paged cache), SwiGLU and the residual
// add. Activations are fp32; a product's input is written beside it as BF16 when the weights are
// BF16 (`gemm_in`, null otherwise). Per-row vectors (norms, biases) come from a table indexed by
// the row's variant slot + 1 (0: the base), so rows of different variants share one launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace optkit::cuda {

// What a step's rows are, in device memory.
struct DeviceRows {
  const int* slot = nullptr;        // [rows]: the row's variant slot, −1: the base
  const int* position = nullptr;    // [rows]
  const int* table_start = nullptr; // [rows]: where the row's sequence's block table starts in `tables`
  const int* tables = nullptr;      // the sequences' block tables, one after another
};

// out[r] = x[source[r]] / rms · weight[slot[r] + 1] (source null: r), over n columns.
void launch_rms_norm(const float* x, const int* source, const int* slot, const float* const* weight, int rows, int n,
                     float eps, float* out, __nv_bfloat16* gemm_in, cudaStream_t stream);

// The paged cache of one layer: [blocks, kv_heads, block_tokens, head_dim] for keys and for
// values, of BF16 (bf16) or fp32 elements.
struct PagedKv {
  void* keys = nullptr;
  void* values = nullptr;
  bool bf16 = true;
  int kv_heads = 0, head_dim = 0, block_tokens = 0;
};

// The q/k/v products' rows finished: bias added (tables null: none), q and k RMS-normed per head
// (tables null: none) and rotated (RoPE, rotate-half, angle position · inverse_frequency[i]);
// q written back in place, keys and values stored in the cache at each row's position.
struct QkvTables {
  const float* const* q_bias = nullptr;
  const float* const* k_bias = nullptr;
  const float* const* v_bias = nullptr;
  const float* const* q_norm = nullptr;
  const float* const* k_norm = nullptr;
};
void launch_qkv_finish(float* q, const float* k, const float* v, const DeviceRows& rows, int row_count, int heads,
                       const QkvTables& tables, float eps, const float* inverse_frequency, const PagedKv& cache,
                       cudaStream_t stream);

// gate[i] = silu(gate[i]) · up[i] over n values.
void launch_silu_multiply(float* gate, const float* up, std::int64_t n, __nv_bfloat16* gemm_in, cudaStream_t stream);

// x[i] += y[i] over n values.
void launch_add(float* x, const float* y, std::int64_t n, cudaStream_t stream);

// out[i] = bf16(x[i]) over n values.
void launch_to_bf16(const float* x, __nv_bfloat16* out, std::int64_t n, cudaStream_t stream);

} // namespace optkit::cuda
