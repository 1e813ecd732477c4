// Element-wise and attention kernels of the CPU runtime (fp32 activations).
#pragma once

#include "model/model_config.hpp"

#include <algorithm>
#include <cstdint>
#include <span>

namespace optkit::runtime {

// out = x / rms(x) * weight over `n` values; x and out may alias.
void rms_norm(const float* x, const float* weight, std::int64_t n, float eps, float* out);

// Rotates one head vector in place, Hugging Face layout (first half paired with second half):
// v' = v * cos + rotate_half(v) * sin on a head's first `rotated` dims, with cos/sin of position
// x inverse frequency (rotated / 2 each); the dims after them pass unchanged (partial rotary).
void apply_rope(float* head, std::int64_t rotated, const float* cos, const float* sin);

// gate = silu(gate) * up, elementwise over n. Defined by the build's kernel file: on x86-64 (unless
// OPTKIT_PORTABLE_KERNELS) kernels_x86.cpp, with AVX-512 where the CPU has it (a vector exp within
// 2 ulp of std::exp); silu_multiply_loops elsewhere.
void silu_multiply(float* gate, const float* up, std::int64_t n);
void silu_multiply_loops(float* gate, const float* up, std::int64_t n);
// gate = gelu_tanh(gate) * up, with PyTorch's tanh approximation 0.5·g·(1 + tanh(√(2/π)(g + 0.044715g³))).
void gelu_tanh_multiply(float* gate, const float* up, std::int64_t n);

// Every value of `x` times `multiplier` (Gemma's embedding scale); nothing when it is 1.
void scale_embeddings(std::span<float> x, float multiplier);

// gate = act(gate) * up with the model's activation (silu_multiply or gelu_tanh_multiply).
void gated_activation(model::Activation activation, float* gate, const float* up, std::int64_t n);

// x = cap · tanh(x / cap) over n values (Gemma's soft-capping).
void soft_cap(float* x, std::int64_t n, float cap);

// One sequence's cached key and value rows in one layer, kept in blocks of `block_tokens` rows of
// `stride` floats: position p's key row is key_blocks[p / block_tokens] + (p % block_tokens)·stride.
struct KvRows {
  float* const* key_blocks;
  float* const* value_blocks;
  std::int64_t block_tokens;
  std::int64_t stride;

  float* key(std::int64_t p) const { return key_blocks[p / block_tokens] + (p % block_tokens) * stride; }
  float* value(std::int64_t p) const { return value_blocks[p / block_tokens] + (p % block_tokens) * stride; }

  // The positions of block `block` within [from, to], and the first one's row (of `blocks`, the
  // key or the value blocks) at `offset`; the next position's row is `stride` floats on.
  struct Run {
    std::int64_t first, last;
    const float* row;
  };
  Run run(float* const* blocks, std::int64_t block, std::int64_t from, std::int64_t to, std::int64_t offset) const {
    const std::int64_t first = std::max(from, block * block_tokens);
    return {first, std::min(to, block * block_tokens + block_tokens - 1),
            blocks[block] + (first - block * block_tokens) * stride + offset};
  }
};

// Causal attention of `heads` query heads that share one KV head (GQA's group), at absolute
// position `position`, over the cached rows of positions [first, position] (the KV head's slice of
// a row starts at `offset`). Scores are q·k·scale, soft-capped when `softcap` > 0. The queries and
// the outputs are `heads` rows of head_dim floats; `scratch` needs heads · (position + 3) floats.
// Defined by the build's kernel file, as silu_multiply is; attend_loops is the plain loops, which
// the AVX-512 kernel matches to fp32 rounding (its sums run in another order, its exp is a
// polynomial).
struct AttentionScores {
  float scale;
  float softcap = 0; // 0: none
};
void attend(const float* queries, std::int64_t heads, const KvRows& cache, std::int64_t offset, std::int64_t first,
            std::int64_t position, std::int64_t head_dim, AttentionScores scores, float* scratch, float* out);
void attend_loops(const float* queries, std::int64_t heads, const KvRows& cache, std::int64_t offset,
                  std::int64_t first, std::int64_t position, std::int64_t head_dim, AttentionScores scores,
                  float* scratch, float* out);

// The kernels attend and silu_multiply run on this build and CPU: "avx512" or "portable".
const char* attention_kernel();

} // namespace optkit::runtime
