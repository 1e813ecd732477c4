// Attention of a step's rows over a paged KV cache (cuda/decoder_kernels.cuh's PagedKv): every
// row is one query token of a sequence at some position, attending causally to its sequence's
// cached positions [first, position] (first > 0 inside a sliding window), so prefill chunks and
// decode tokens of many sequences share one launch. Split-KV: pass 1 runs an online softmax over
// slices of each row's cache in parallel, one block serving a whole GQA group from one read of
// the cache (head_dim / 8 lanes per position, 16- or 32-byte loads through the block table);
// pass 2 merges the slices.
#pragma once

#include "decoder_kernels.cuh"

#include <cuda_runtime.h>

#include <cstddef>

namespace optkit::cuda {

struct PagedAttentionShape {
  int rows, heads, kv_heads, head_dim;
  int max_length;     // the longest row's position + 1
  int sliding_window; // 0: none
};

// Whether the kernel serves this head size and GQA group: head_dim 32, 64, 128 or 256, groups of
// up to 8 query heads per KV head.
bool paged_attention_supports(int head_dim, int heads, int kv_heads);

struct PagedAttentionPlan {
  int splits, split_len, group_tile;
};
// Eight blocks an SM where slices of at least 64 positions allow.
PagedAttentionPlan plan_paged_attention(const PagedAttentionShape& shape, int multiprocessors);
std::size_t paged_attention_scratch_floats(const PagedAttentionShape& shape, const PagedAttentionPlan& plan);

// q: [rows, heads, head_dim] fp32 (RoPE applied); out: [rows, heads, head_dim] fp32; scratch:
// the floats above.
void launch_paged_attention(const float* q, const PagedKv& cache, const DeviceRows& rows, float* out, float* scratch,
                            const PagedAttentionShape& shape, const PagedAttentionPlan& plan, float scale,
                            cudaStream_t stream);

} // namespace optkit::cuda
