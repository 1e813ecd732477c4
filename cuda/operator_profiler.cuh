// Times serving operators on one CUDA device for `optkit plan profile` — the timing harness over
// the operations in their own files: cuBLASLt products (gemm.cuh), split-KV decode attention
// (decode_attention.cuh), prefill attention as batched products around the causal softmax
// (prefill_softmax.cuh), and a copy kernel (copy.cuh). Plain C++ interface: callers need no CUDA
// headers. Every figure is in microseconds.
#pragma once

#include "gemm_kind.cuh"

#include <cstdint>
#include <memory>
#include <string>

namespace optkit::cuda {

class OperatorProfiler {
public:
  // Opens device `device` (of those CUDA_VISIBLE_DEVICES shows) and cuBLASLt; throws
  // std::runtime_error naming what is missing.
  explicit OperatorProfiler(int device);
  ~OperatorProfiler();
  OperatorProfiler(const OperatorProfiler&) = delete;
  OperatorProfiler& operator=(const OperatorProfiler&) = delete;

  std::string device_name() const;
  int compute_capability() const; // major × 10 + minor
  std::uint64_t memory_bytes() const;

  // Y[m, n] = X[m, k] · W[n, k]ᵀ, the layout of a linear layer; fp8 needs compute capability ≥ 8.9.
  bool supports_gemm(GemmKind kind) const;
  double gemm_us(GemmKind kind, int m, int n, int k);
  // Causal self-attention over `seq` new tokens per sequence, BF16, GQA (heads a multiple of kv_heads).
  double attention_prefill_us(int batch, int seq, int heads, int kv_heads, int head_dim);
  // One new token per sequence attending to `kv_len` cached tokens (BF16 cache), head_dim ≤ 256.
  double attention_decode_us(int batch, int kv_len, int heads, int kv_heads, int head_dim);
  // The decode attention kernel on random inputs against the same attention in double precision
  // on the CPU: the largest absolute error of the BF16 output (≈ 1e-2 at most when it is right).
  double attention_decode_max_error(int batch, int kv_len, int heads, int kv_heads, int head_dim);
  // Device-to-device copy of `bytes` (reads and writes that many bytes each).
  double copy_us(std::uint64_t bytes);

private:
  struct State;
  std::unique_ptr<State> m_state;
};

} // namespace optkit::cuda
