#include "check.cuh"
#include "operator_profiler.cuh"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace optkit::cuda {

namespace {

using bf16 = __nv_bfloat16;

void
check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + error_text(err));
}

void
check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + " failed with cuBLAS status " + std::to_string(int(status)));
}

// cuBLASLt's entry points, resolved from the shared library at run time.
struct CublasLtLibrary {
  void* handle = nullptr;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;

  void open() {
    std::vector<std::string> candidates;
    if (const char* path = std::getenv("OPTKIT_CUBLASLT"))
      candidates.emplace_back(path);
    for (const char* name : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}) {
      candidates.emplace_back(name);
      candidates.emplace_back(std::string("/usr/local/cuda/lib64/") + name);
    }
    for (const auto& candidate : candidates)
      if ((handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr)
        break;
    if (handle == nullptr)
      throw std::runtime_error("cannot load cuBLASLt (libcublasLt.so.13 or .12): install the CUDA toolkit's cuBLAS "
                               "or set OPTKIT_CUBLASLT to the library's path");
    resolve(create, "cublasLtCreate");
    resolve(destroy, "cublasLtDestroy");
    resolve(desc_create, "cublasLtMatmulDescCreate");
    resolve(desc_destroy, "cublasLtMatmulDescDestroy");
    resolve(desc_set, "cublasLtMatmulDescSetAttribute");
    resolve(layout_create, "cublasLtMatrixLayoutCreate");
    resolve(layout_destroy, "cublasLtMatrixLayoutDestroy");
    resolve(layout_set, "cublasLtMatrixLayoutSetAttribute");
    resolve(preference_create, "cublasLtMatmulPreferenceCreate");
    resolve(preference_destroy, "cublasLtMatmulPreferenceDestroy");
    resolve(preference_set, "cublasLtMatmulPreferenceSetAttribute");
    resolve(heuristic, "cublasLtMatmulAlgoGetHeuristic");
    resolve(matmul, "cublasLtMatmul");
  }

  template <class F> void resolve(F& fn, const char* name) {
    fn = reinterpret_cast<F>(dlsym(handle, name));
    if (fn == nullptr)
      throw std::runtime_error(std::string("cuBLASLt has no symbol ") + name);
  }
};

// One column-major operand: rows × cols with leading dimension ld, `batch` of them `stride` apart.
struct Operand {
  cudaDataType_t type;
  std::int64_t rows, cols, ld;
  int batch = 1;
  std::int64_t stride = 0;
};

// A prepared cuBLASLt product D = alpha · op(A) · op(B) with the algorithm its heuristic picks.
class LtMatmul {
public:
  LtMatmul(const CublasLtLibrary& lt, cublasLtHandle_t handle, cublasComputeType_t compute, cudaDataType_t scale,
           cublasOperation_t trans_a, cublasOperation_t trans_b, const Operand& a, const Operand& b, const Operand& d,
           std::size_t workspace_bytes, float alpha)
      : m_lt(lt), m_handle(handle), m_integer(scale == CUDA_R_32I), m_alpha(alpha), m_workspace_bytes(workspace_bytes) {
    check(lt.desc_create(&m_desc, compute, scale), "cublasLtMatmulDescCreate");
    check(lt.desc_set(m_desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a), "TRANSA");
    check(lt.desc_set(m_desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b), "TRANSB");
    m_a = layout(a);
    m_b = layout(b);
    m_d = layout(d);
    cublasLtMatmulPreference_t preference = nullptr;
    check(lt.preference_create(&preference), "cublasLtMatmulPreferenceCreate");
    lt.preference_set(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof workspace_bytes);
    int found = 0;
    const auto status = lt.heuristic(handle, m_desc, m_a, m_b, m_d, m_d, preference, 1, &m_choice, &found);
    lt.preference_destroy(preference);
    if (status != CUBLAS_STATUS_SUCCESS || found == 0)
      throw std::runtime_error("cuBLASLt offers no algorithm for this product (type or shape unsupported)");
  }
  ~LtMatmul() {
    for (auto l : {m_a, m_b, m_d})
      if (l != nullptr)
        m_lt.layout_destroy(l);
    if (m_desc != nullptr)
      m_lt.desc_destroy(m_desc);
  }
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  void run(const void* a, const void* b, void* d, void* workspace, cudaStream_t stream) const {
    const int int_alpha = 1, int_beta = 0;
    const float beta = 0.0f;
    const void* alpha = m_integer ? static_cast<const void*>(&int_alpha) : static_cast<const void*>(&m_alpha);
    const void* zero = m_integer ? static_cast<const void*>(&int_beta) : static_cast<const void*>(&beta);
    check(m_lt.matmul(m_handle, m_desc, alpha, a, m_a, b, m_b, zero, d, m_d, d, m_d, &m_choice.algo, workspace,
                      m_workspace_bytes, stream),
          "cublasLtMatmul");
  }

private:
  const CublasLtLibrary& m_lt;
  cublasLtHandle_t m_handle;
  bool m_integer;
  float m_alpha;
  std::size_t m_workspace_bytes;
  cublasLtMatmulDesc_t m_desc = nullptr;
  cublasLtMatrixLayout_t m_a = nullptr, m_b = nullptr, m_d = nullptr;
  cublasLtMatmulHeuristicResult_t m_choice{};

  cublasLtMatrixLayout_t layout(const Operand& o) const {
    cublasLtMatrixLayout_t l = nullptr;
    check(m_lt.layout_create(&l, o.type, static_cast<std::uint64_t>(o.rows), static_cast<std::uint64_t>(o.cols), o.ld),
          "cublasLtMatrixLayoutCreate");
    if (o.batch > 1) {
      check(m_lt.layout_set(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &o.batch, sizeof o.batch), "BATCH_COUNT");
      check(m_lt.layout_set(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &o.stride, sizeof o.stride),
            "STRIDED_BATCH_OFFSET");
    }
    return l;
  }
};

__device__ __forceinline__ std::uint32_t
hash32(std::uint64_t i, std::uint32_t seed) {
  auto x = static_cast<std::uint32_t>(i * 0x9E3779B97F4A7C15ull >> 32) ^ seed;
  x ^= x >> 16;
  x *= 0x7feb352d;
  x ^= x >> 15;
  x *= 0x846ca68b;
  x ^= x >> 16;
  return x;
}

// Finite values for every operand type: with bit 6 of each byte cleared an FP8 E4M3 byte is never
// NaN and a BF16/FP16 value stays below 2 in magnitude (its top exponent bit is clear).
__global__ void
fill_bytes(std::uint8_t* p, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    p[i] = static_cast<std::uint8_t>(hash32(i, seed) & 0xBFu);
}

__global__ void
copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

// Causal softmax over rows of S (row-major, `seq` columns); row r is query position r % seq.
__global__ void
causal_softmax(bf16* s, std::int64_t rows, int seq) {
  const std::int64_t row = blockIdx.x;
  if (row >= rows)
    return;
  bf16* r = s + row * seq;
  const int last = static_cast<int>(row % seq); // attends to columns 0..last
  __shared__ float reduce[32];
  float m = -INFINITY;
  for (int c = threadIdx.x; c <= last; c += blockDim.x)
    m = fmaxf(m, __bfloat162float(r[c]));
  for (int o = 16; o > 0; o >>= 1)
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0)
    reduce[threadIdx.x / 32] = m;
  __syncthreads();
  m = -INFINITY;
  for (int w = 0; w < int(blockDim.x / 32); ++w)
    m = fmaxf(m, reduce[w]);
  __syncthreads();
  float sum = 0.0f;
  for (int c = threadIdx.x; c <= last; c += blockDim.x)
    sum += __expf(__bfloat162float(r[c]) - m);
  for (int o = 16; o > 0; o >>= 1)
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x % 32 == 0)
    reduce[threadIdx.x / 32] = sum;
  __syncthreads();
  sum = 0.0f;
  for (int w = 0; w < int(blockDim.x / 32); ++w)
    sum += reduce[w];
  const float inv = 1.0f / sum;
  for (int c = threadIdx.x; c < seq; c += blockDim.x)
    r[c] = __float2bfloat16(c <= last ? __expf(__bfloat162float(r[c]) - m) * inv : 0.0f);
}

constexpr int kDecodeWarps = 4;
constexpr int kMaxPerLane = 8; // head_dim ≤ 256

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

} // namespace

struct OperatorProfiler::State {
  int device = 0;
  cudaDeviceProp properties{};
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  CublasLtLibrary lt;
  cublasLtHandle_t handle = nullptr;
  static constexpr std::size_t kWorkspaceBytes = std::size_t(32) << 20;
  void* workspace = nullptr;
  struct Buffer {
    void* data = nullptr;
    std::size_t bytes = 0;
  };
  Buffer buffers[6];

  // Buffer `slot` of at least `bytes` bytes, filled with small finite values when (re)allocated.
  void* buffer(int slot, std::size_t bytes) {
    Buffer& b = buffers[slot];
    if (b.bytes < bytes) {
      if (b.data != nullptr)
        check(cudaFree(b.data), "cudaFree");
      b.data = nullptr;
      b.bytes = 0;
      check(cudaMalloc(&b.data, bytes), "cudaMalloc (the point needs more memory than is free)");
      b.bytes = bytes;
      const int blocks = static_cast<int>(std::min<std::size_t>((bytes + 255) / 256, 4096));
      fill_bytes<<<blocks, 256, 0, stream>>>(static_cast<std::uint8_t*>(b.data), bytes,
                                             static_cast<std::uint32_t>(slot * 7919 + 17));
      check(cudaGetLastError(), "fill kernel");
    }
    return b.data;
  }

  // How many copies of a `bytes`-sized operand, and how far apart, make a rotation that overflows
  // L2 twice over: each layer of a real step streams its own weights and cache from HBM.
  std::pair<std::size_t, std::size_t> rotation(std::size_t bytes) const {
    const std::size_t stride = (bytes + 255) / 256 * 256;
    const std::size_t l2 = static_cast<std::size_t>(std::max(properties.l2CacheSize, 1 << 20));
    return {std::clamp<std::size_t>((2 * l2 + stride - 1) / stride, 1, 64), stride};
  }

  // Median over 7 measurements of the mean time of a batch of launches (about 2 ms each).
  template <class Launch> double time_us(Launch&& launch) {
    launch();
    launch();
    check(cudaStreamSynchronize(stream), "warm-up");
    float ms = 0;
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    launch();
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    const int per_batch = std::clamp(static_cast<int>(2.0 / std::max(ms, 1e-3f)), 1, 200);
    std::vector<double> samples;
    for (int r = 0; r < 7; ++r) {
      check(cudaEventRecord(start, stream), "cudaEventRecord");
      for (int i = 0; i < per_batch; ++i)
        launch();
      check(cudaEventRecord(stop, stream), "cudaEventRecord");
      check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      samples.push_back(1000.0 * ms / per_batch);
    }
    check(cudaGetLastError(), "timed launches");
    std::nth_element(samples.begin(), samples.begin() + 3, samples.end());
    return samples[3];
  }
};

OperatorProfiler::OperatorProfiler(int device) : m_state(std::make_unique<State>()) {
  State& s = *m_state;
  s.device = device;
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (device < 0 || device >= count)
    throw std::runtime_error("no CUDA device " + std::to_string(device) + " (" + std::to_string(count) + " visible)");
  check(cudaSetDevice(device), "cudaSetDevice");
  check(cudaGetDeviceProperties(&s.properties, device), "cudaGetDeviceProperties");
  check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaEventCreate(&s.start), "cudaEventCreate");
  check(cudaEventCreate(&s.stop), "cudaEventCreate");
  s.lt.open();
  check(s.lt.create(&s.handle), "cublasLtCreate");
  check(cudaMalloc(&s.workspace, State::kWorkspaceBytes), "cudaMalloc (workspace)");
}

OperatorProfiler::~OperatorProfiler() {
  State& s = *m_state;
  cudaDeviceSynchronize();
  for (auto& b : s.buffers)
    if (b.data != nullptr)
      cudaFree(b.data);
  if (s.workspace != nullptr)
    cudaFree(s.workspace);
  if (s.handle != nullptr)
    s.lt.destroy(s.handle);
  if (s.start != nullptr)
    cudaEventDestroy(s.start);
  if (s.stop != nullptr)
    cudaEventDestroy(s.stop);
  if (s.stream != nullptr)
    cudaStreamDestroy(s.stream);
  // The library stays loaded: cuBLASLt's own teardown runs at process exit.
}

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
OperatorProfiler::supports_gemm(const std::string& kind) const {
  if (kind == "bf16" || kind == "fp16" || kind == "int8")
    return true;
  return kind == "fp8" && compute_capability() >= 89;
}

double
OperatorProfiler::gemm_us(const std::string& kind, int m, int n, int k) {
  if (!supports_gemm(kind))
    throw std::runtime_error("cuBLASLt on " + device_name() + " has no " + kind + " product");
  State& s = *m_state;
  // Column-major: D (n × m) = Wᵀ-op(A: k × n) · B (k × m); the "TN" layout FP8 and INT8 require.
  cudaDataType_t in = CUDA_R_16BF, out = CUDA_R_16BF, scale = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  std::size_t in_bytes = 2, out_bytes = 2;
  if (kind == "fp16") {
    in = out = CUDA_R_16F;
  } else if (kind == "fp8") {
    in = CUDA_R_8F_E4M3;
    in_bytes = 1;
  } else if (kind == "int8") {
    in = CUDA_R_8I;
    out = CUDA_R_32I;
    scale = CUDA_R_32I;
    compute = CUBLAS_COMPUTE_32I;
    in_bytes = 1;
    out_bytes = 4;
  }
  const Operand a{in, k, n, k}, b{in, k, m, k}, d{out, n, m, n};
  LtMatmul product(s.lt, s.handle, compute, scale, CUBLAS_OP_T, CUBLAS_OP_N, a, b, d, State::kWorkspaceBytes, 1.0f);
  const auto rotation = s.rotation(std::size_t(n) * k * in_bytes);
  const std::size_t copies = rotation.first, stride = rotation.second;
  auto* weights = static_cast<char*>(s.buffer(0, copies * stride));
  void* xb = s.buffer(1, std::size_t(k) * m * in_bytes);
  void* yd = s.buffer(2, std::size_t(n) * m * out_bytes);
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
    causal_softmax<<<static_cast<unsigned>(softmax_rows), 256, 0, s.stream>>>(static_cast<bf16*>(p), softmax_rows, seq);
    mix.run(v, p, o, s.workspace, s.stream);
  });
}

double
OperatorProfiler::attention_decode_us(int batch, int kv_len, int heads, int kv_heads, int head_dim) {
  if (head_dim > 32 * kMaxPerLane)
    throw std::runtime_error("the decode attention kernel handles head_dim ≤ 256");
  if (kv_heads <= 0 || heads % kv_heads != 0)
    throw std::runtime_error("heads must be a multiple of kv_heads");
  State& s = *m_state;
  // Enough blocks to fill every SM twice, slices of at least 256 cached positions.
  const int blocks = batch * heads;
  const int wanted = std::max(1, (2 * s.properties.multiProcessorCount + blocks - 1) / blocks);
  const int splits = std::clamp((kv_len + 255) / 256, 1, wanted);
  const int split_len = (kv_len + splits - 1) / splits;
  const std::size_t kv_bytes = std::size_t(batch) * kv_heads * kv_len * head_dim * 2;
  const std::size_t q_bytes = std::size_t(batch) * heads * head_dim * 2;
  const auto rotation = s.rotation(kv_bytes);
  const std::size_t copies = rotation.first, stride = rotation.second;
  auto* q = static_cast<const bf16*>(s.buffer(0, q_bytes));
  auto* k = static_cast<const char*>(s.buffer(1, copies * stride));
  auto* v = static_cast<const char*>(s.buffer(2, copies * stride));
  auto* out = static_cast<bf16*>(s.buffer(3, q_bytes));
  auto* acc = static_cast<float*>(s.buffer(4, std::size_t(blocks) * splits * head_dim * 4));
  auto* ml = static_cast<float*>(s.buffer(5, std::size_t(blocks) * splits * 2 * 4));
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const dim3 partial_grid(static_cast<unsigned>(heads), static_cast<unsigned>(batch), static_cast<unsigned>(splits));
  const dim3 combine_grid(static_cast<unsigned>(heads), static_cast<unsigned>(batch));
  const unsigned combine_threads = static_cast<unsigned>((head_dim + 31) / 32 * 32);
  std::size_t next = 0;
  return s.time_us([&] {
    const std::size_t offset = (next++ % copies) * stride;
    decode_attention_partial<<<partial_grid, 32 * kDecodeWarps, 0, s.stream>>>(
        q, reinterpret_cast<const bf16*>(k + offset), reinterpret_cast<const bf16*>(v + offset), acc, ml, heads,
        kv_heads, head_dim, kv_len, split_len, scale);
    decode_attention_combine<<<combine_grid, combine_threads, 0, s.stream>>>(acc, ml, out, heads, head_dim, splits);
  });
}

double
OperatorProfiler::copy_us(std::uint64_t bytes) {
  State& s = *m_state;
  const std::size_t vectors = std::max<std::size_t>(1, bytes / sizeof(uint4));
  auto* src = static_cast<const uint4*>(s.buffer(0, vectors * sizeof(uint4)));
  auto* dst = static_cast<uint4*>(s.buffer(1, vectors * sizeof(uint4)));
  const int blocks =
      static_cast<int>(std::min<std::size_t>((vectors + 511) / 512, std::size_t(s.properties.multiProcessorCount) * 8));
  return s.time_us([&] { copy_kernel<<<blocks, 512, 0, s.stream>>>(src, dst, vectors); });
}

} // namespace optkit::cuda
