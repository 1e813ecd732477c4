#include "check.cuh"
#include "copy.cuh"
#include "decode_attention.cuh"
#include "device_array.cuh"
#include "device_session.cuh"
#include "fill.cuh"
#include "gemm.cuh"
#include "operator_profiler.cuh"
#include "prefill_softmax.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace optkit::cuda {

using bf16 = __nv_bfloat16;

struct OperatorProfiler::State : DeviceSession {
  explicit State(int device) : DeviceSession(device) {}
  DeviceArray<std::byte> buffers[6];

  // Buffer `slot` of at least `bytes` bytes, filled with small finite values when (re)allocated.
  void* buffer(int slot, std::size_t bytes) {
    DeviceArray<std::byte>& b = buffers[slot];
    if (b.reserve(bytes, "cudaMalloc (the point needs more memory than is free)"))
      fill_finite_bytes(b.data, bytes, static_cast<std::uint32_t>(slot * 7919 + 17), stream);
    return b.data;
  }

  // How many copies of a `bytes`-sized operand, and how far apart, make a rotation that overflows
  // L2 twice over: each layer of a real step streams its own weights and cache from HBM.
  std::pair<std::size_t, std::size_t> rotation(std::size_t bytes) const {
    const std::size_t stride = (bytes + 255) / 256 * 256;
    const std::size_t l2 = static_cast<std::size_t>(std::max(properties.l2CacheSize, 1 << 20));
    return {std::clamp<std::size_t>((2 * l2 + stride - 1) / stride, 1, 64), stride};
  }
};

OperatorProfiler::OperatorProfiler(int device) : m_state(std::make_unique<State>(device)) {}

// The buffers go first (cudaFree waits for the device), then the session's stream, events,
// cuBLASLt handle and workspace.
OperatorProfiler::~OperatorProfiler() = default;

std::string
OperatorProfiler::device_name() const {
  return m_state->properties.name;
}

int
OperatorProfiler::compute_capability() const {
  return m_state->properties.major * 10 + m_state->properties.minor;
}

std::uint64_t
OperatorProfiler::memory_bytes() const {
  return m_state->properties.totalGlobalMem;
}

bool
OperatorProfiler::supports_gemm(GemmKind kind) const {
  return kind != GemmKind::fp8 || compute_capability() >= 89;
}

double
OperatorProfiler::gemm_us(GemmKind kind, int m, int n, int k) {
  if (!supports_gemm(kind))
    throw std::runtime_error("cuBLASLt on " + device_name() + " has no " + to_string(kind) + " product");
  State& s = *m_state;
  // Column-major: D (n × m) = Wᵀ-op(A: k × n) · B (k × m); the "TN" layout FP8 and INT8 require.
  const GemmTypes t = gemm_types(kind);
  const Operand a{t.input, k, n, k}, b{t.input, k, m, k}, d{t.output, n, m, n};
  LtMatmul product(s.lt, s.handle, t.compute, t.scale, CUBLAS_OP_T, CUBLAS_OP_N, a, b, d, State::kWorkspaceBytes, 1.0f);
  const auto rotation = s.rotation(std::size_t(n) * k * t.input_bytes);
  const std::size_t copies = rotation.first, stride = rotation.second;
  auto* weights = static_cast<char*>(s.buffer(0, copies * stride));
  void* xb = s.buffer(1, std::size_t(k) * m * t.input_bytes);
  void* yd = s.buffer(2, std::size_t(n) * m * t.output_bytes);
  std::size_t next = 0;
  return s.time_us([&] { product.run(weights + (next++ % copies) * stride, xb, yd, s.workspace, s.stream); });
}

double
OperatorProfiler::attention_prefill_us(int batch, int seq, int heads, int kv_heads, int head_dim) {
  if (kv_heads <= 0 || heads % kv_heads != 0)
    throw std::runtime_error("heads must be a multiple of kv_heads");
  State& s = *m_state;
  const int group = heads / kv_heads, pairs = batch * kv_heads;
  const std::int64_t rows = std::int64_t(group) * seq; // query rows per (sequence, KV head)
  // Q, O: [batch, kv_heads, group, seq, head_dim]; K, V: [batch, kv_heads, seq, head_dim];
  // S: [batch, kv_heads, group·seq, seq], all row-major BF16.
  const Operand k_op{CUDA_R_16BF, head_dim, seq, head_dim, pairs, std::int64_t(seq) * head_dim};
  const Operand q_op{CUDA_R_16BF, head_dim, rows, head_dim, pairs, rows * head_dim};
  const Operand s_op{CUDA_R_16BF, seq, rows, seq, pairs, rows * seq};
  const Operand v_op{CUDA_R_16BF, head_dim, seq, head_dim, pairs, std::int64_t(seq) * head_dim};
  const Operand o_op{CUDA_R_16BF, head_dim, rows, head_dim, pairs, rows * head_dim};
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  LtMatmul scores(s.lt, s.handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUBLAS_OP_T, CUBLAS_OP_N, k_op, q_op, s_op,
                  State::kWorkspaceBytes, scale);
  LtMatmul mix(s.lt, s.handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUBLAS_OP_N, CUBLAS_OP_N, v_op, s_op, o_op,
               State::kWorkspaceBytes, 1.0f);
  const std::size_t qo_bytes = std::size_t(pairs) * rows * head_dim * 2;
  const std::size_t kv_bytes = std::size_t(pairs) * seq * head_dim * 2;
  void* q = s.buffer(0, qo_bytes);
  void* k = s.buffer(1, kv_bytes);
  void* v = s.buffer(2, kv_bytes);
  void* o = s.buffer(3, qo_bytes);
  void* p = s.buffer(4, std::size_t(pairs) * rows * seq * 2);
  const std::int64_t softmax_rows = std::int64_t(pairs) * rows;
  return s.time_us([&] {
    scores.run(k, q, p, s.workspace, s.stream);
    launch_causal_softmax(static_cast<bf16*>(p), softmax_rows, seq, s.stream);
    mix.run(v, p, o, s.workspace, s.stream);
  });
}

double
OperatorProfiler::attention_decode_us(int batch, int kv_len, int heads, int kv_heads, int head_dim) {
  if (head_dim > kDecodeAttentionMaxHeadDim)
    throw std::runtime_error("the decode attention kernel handles head_dim ≤ 256");
  if (kv_heads <= 0 || heads % kv_heads != 0)
    throw std::runtime_error("heads must be a multiple of kv_heads");
  State& s = *m_state;
  const DecodeAttentionShape shape{batch, heads, kv_heads, head_dim, kv_len};
  const DecodeSplits splits = plan_decode_splits(shape, s.properties.multiProcessorCount);
  const std::size_t kv_bytes = std::size_t(batch) * kv_heads * kv_len * head_dim * 2;
  const std::size_t q_bytes = std::size_t(batch) * heads * head_dim * 2;
  const auto rotation = s.rotation(kv_bytes);
  const std::size_t copies = rotation.first, stride = rotation.second;
  auto* q = static_cast<const bf16*>(s.buffer(0, q_bytes));
  auto* k = static_cast<const char*>(s.buffer(1, copies * stride));
  auto* v = static_cast<const char*>(s.buffer(2, copies * stride));
  auto* out = static_cast<bf16*>(s.buffer(3, q_bytes));
  auto* partial = static_cast<float*>(s.buffer(4, decode_attention_partial_floats(shape, splits) * 4));
  auto* stats = static_cast<float*>(s.buffer(5, decode_attention_stats_floats(shape, splits) * 4));
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  std::size_t next = 0;
  return s.time_us([&] {
    const std::size_t offset = (next++ % copies) * stride;
    launch_decode_attention(q, reinterpret_cast<const bf16*>(k + offset), reinterpret_cast<const bf16*>(v + offset),
                            out, partial, stats, shape, splits, scale, s.stream);
  });
}

double
OperatorProfiler::attention_decode_max_error(int batch, int kv_len, int heads, int kv_heads, int head_dim) {
  if (head_dim > kDecodeAttentionMaxHeadDim || kv_heads <= 0 || heads % kv_heads != 0)
    throw std::runtime_error("decode attention check: unsupported shape");
  State& s = *m_state;
  const DecodeAttentionShape shape{batch, heads, kv_heads, head_dim, kv_len};
  const DecodeSplits splits = plan_decode_splits(shape, s.properties.multiProcessorCount);
  const std::size_t q_count = std::size_t(batch) * heads * head_dim;
  const std::size_t kv_count = std::size_t(batch) * kv_heads * kv_len * head_dim;
  // Deterministic values in [-2, 2): scores spread enough that the softmax is not uniform.
  std::uint32_t state = 12345;
  const auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / 16777216.0f * 4.0f - 2.0f;
  };
  std::vector<bf16> q(q_count), k(kv_count), v(kv_count), out(q_count);
  for (auto* values : {&q, &k, &v})
    for (auto& x : *values)
      x = __float2bfloat16(next());
  bf16 *dq = nullptr, *dk = nullptr, *dv = nullptr, *dout = nullptr;
  float *partial = nullptr, *stats = nullptr;
  const auto release = [&] {
    for (void* p : {static_cast<void*>(dq), static_cast<void*>(dk), static_cast<void*>(dv), static_cast<void*>(dout),
                    static_cast<void*>(partial), static_cast<void*>(stats)})
      cudaFree(p);
  };
  try {
    check(cudaMalloc(&dq, q_count * 2), "cudaMalloc");
    check(cudaMalloc(&dk, kv_count * 2), "cudaMalloc");
    check(cudaMalloc(&dv, kv_count * 2), "cudaMalloc");
    check(cudaMalloc(&dout, q_count * 2), "cudaMalloc");
    check(cudaMalloc(&partial, decode_attention_partial_floats(shape, splits) * 4), "cudaMalloc");
    check(cudaMalloc(&stats, decode_attention_stats_floats(shape, splits) * 4), "cudaMalloc");
    // On the kernel's stream: a plain cudaMemcpy from pageable memory may return before its DMA
    // lands, and s.stream does not wait for the legacy stream (a race that showed as errors of
    // 0.1-0.3 on some runs of some shapes).
    check(cudaMemcpyAsync(dq, q.data(), q_count * 2, cudaMemcpyHostToDevice, s.stream), "cudaMemcpyAsync");
    check(cudaMemcpyAsync(dk, k.data(), kv_count * 2, cudaMemcpyHostToDevice, s.stream), "cudaMemcpyAsync");
    check(cudaMemcpyAsync(dv, v.data(), kv_count * 2, cudaMemcpyHostToDevice, s.stream), "cudaMemcpyAsync");
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    launch_decode_attention(dq, dk, dv, dout, partial, stats, shape, splits, scale, s.stream);
    check(cudaStreamSynchronize(s.stream), "decode attention");
    check(cudaMemcpy(out.data(), dout, q_count * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
  } catch (...) {
    release();
    throw;
  }
  release();
  double worst = 0;
  std::vector<double> scores(static_cast<std::size_t>(kv_len));
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      const int kvh = h / (heads / kv_heads);
      const bf16* qh = &q[(std::size_t(b) * heads + h) * head_dim];
      const std::size_t base = (std::size_t(b) * kv_heads + kvh) * std::size_t(kv_len) * head_dim;
      double top = -INFINITY;
      for (int p = 0; p < kv_len; ++p) {
        double dot = 0;
        for (int d = 0; d < head_dim; ++d)
          dot += double(__bfloat162float(qh[d])) * double(__bfloat162float(k[base + std::size_t(p) * head_dim + d]));
        scores[std::size_t(p)] = dot / std::sqrt(double(head_dim));
        top = std::max(top, scores[std::size_t(p)]);
      }
      double sum = 0;
      for (auto& x : scores)
        sum += (x = std::exp(x - top));
      for (int d = 0; d < head_dim; ++d) {
        double expected = 0;
        for (int p = 0; p < kv_len; ++p)
          expected += scores[std::size_t(p)] * double(__bfloat162float(v[base + std::size_t(p) * head_dim + d]));
        expected /= sum;
        const double got = __bfloat162float(out[(std::size_t(b) * heads + h) * head_dim + d]);
        worst = std::max(worst, std::fabs(got - expected));
      }
    }
  return worst;
}

double
OperatorProfiler::copy_us(std::uint64_t bytes) {
  State& s = *m_state;
  const std::size_t vectors = std::max<std::size_t>(1, bytes / sizeof(uint4));
  auto* src = static_cast<const uint4*>(s.buffer(0, vectors * sizeof(uint4)));
  auto* dst = static_cast<uint4*>(s.buffer(1, vectors * sizeof(uint4)));
  const int blocks =
      static_cast<int>(std::min<std::size_t>((vectors + 511) / 512, std::size_t(s.properties.multiProcessorCount) * 8));
  return s.time_us([&] { launch_copy(src, dst, vectors, blocks, s.stream); });
}

} // namespace optkit::cuda
