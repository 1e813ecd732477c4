// Split-KV decode attention: one new token per sequence attends to its cached keys and values
// (BF16, GQA). Pass 1 runs an online softmax over slices of the cache in parallel; pass 2 merges
// the slices. The split count fills the GPU even at batch 1. For head_dim 64, 128 and 256 one
// block serves a whole GQA group from one read of the cache: groups of up to 4 heads with 16-byte
// loads spread over the lanes of a position (2.3 TB/s on an H100 at large batch × length, against
// 0.42 TB/s for the per-head path other sizes take); groups of 5 to 8 (and tiles of 8 beyond)
// with positions staged in shared memory, one lane per position for the scores and one softmax
// rescale per 32 positions. OPTKIT_DECODE_ATTENTION=grouped|staged, read when the splits are
// planned, forces one of the two.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace optkit::cuda {

constexpr int kDecodeAttentionMaxHeadDim = 256;

struct DecodeAttentionShape {
  int batch, heads, kv_heads, head_dim, kv_len;
};

// Which kernel runs pass 1: generic (any head_dim), grouped (head_dim 64/128/256, GQA groups of
// up to 4) or staged (those head sizes, larger groups).
enum class DecodeKernel { generic, grouped, staged };

// How the cache is sliced, and by which kernel: enough blocks to fill every SM, slices of at
// least 64 positions (256 on the generic kernel).
struct DecodeSplits {
  int splits, split_len;
  DecodeKernel kernel;
};
DecodeSplits plan_decode_splits(const DecodeAttentionShape& shape, int multiprocessors);

// Scratch the two passes share, in floats.
std::size_t decode_attention_partial_floats(const DecodeAttentionShape& shape, const DecodeSplits& splits);
std::size_t decode_attention_stats_floats(const DecodeAttentionShape& shape, const DecodeSplits& splits);

// q: [batch, heads, head_dim]; k, v: [batch, kv_heads, kv_len, head_dim]; out: [batch, heads,
// head_dim]; partial and stats: the scratch above. heads a multiple of kv_heads, head_dim ≤ 256.
void launch_decode_attention(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* out,
                             float* partial, float* stats, const DecodeAttentionShape& shape,
                             const DecodeSplits& splits, float scale, cudaStream_t stream);

} // namespace optkit::cuda
