// Dense F32/BF16/F16 weights. Few activation rows (decode): each thread streams its share of W's
// rows once and forms up to four dot products per row with AVX2+FMA (scalar fallback elsewhere),
// which keeps decode bound by memory bandwidth. Many rows (prefill): blocks of W are widened to
// fp32 and handed to OpenBLAS sgemm.
#include "runtime/linear_weight.hpp"

#include "core/error.hpp"
#include "core/thread_pool.hpp"

#include <algorithm>
#include <cblas.h>
#include <cpuid.h>
#include <cstdlib>
#include <cstring>
#include <immintrin.h>
#include <mutex>
#include <vector>

namespace optkit::runtime {

namespace {

using model::DType;

constexpr std::int64_t kBlasMinRows = 8;         // activation rows from which sgemm pays off
constexpr std::int64_t kWidenedBlasMinRows = 32; // the same when W must be widened first
constexpr std::int64_t kGemmBlockRows = 64;      // W rows per sgemm call (widened to fp32: 64 x K floats, L2-sized)

struct Bf16 {
  std::uint16_t bits;
};
struct F16 {
  std::uint16_t bits;
};

inline float
to_float(float v) {
  return v;
}
inline float
to_float(Bf16 v) {
  return model::bf16_to_float(v.bits);
}
inline float
to_float(F16 v) {
  return model::f16_to_float(v.bits);
}

#define OPTKIT_AVX2 __attribute__((target("avx2,fma,f16c")))

OPTKIT_AVX2 inline __m256
load8(const float* p) {
  return _mm256_loadu_ps(p);
}
OPTKIT_AVX2 inline __m256
load8(const Bf16* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
OPTKIT_AVX2 inline __m256
load8(const F16* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
OPTKIT_AVX2 inline float
horizontal_sum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// y[0, r] for r in [r0, r1): one activation row (decode at batch 1), four independent
// accumulators so the loop is bound by loading W, not by FMA latency.
template <typename T>
OPTKIT_AVX2 void
dot_rows_avx2_single(const T* w, std::int64_t cols, std::int64_t r0, std::int64_t r1, const float* x, float* y) {
  const std::int64_t wide_end = cols - cols % 32, vec_end = cols - cols % 8;
  for (std::int64_t r = r0; r < r1; ++r) {
    const T* wr = w + r * cols;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    std::int64_t c = 0;
    for (; c < wide_end; c += 32) {
      a0 = _mm256_fmadd_ps(load8(wr + c), _mm256_loadu_ps(x + c), a0);
      a1 = _mm256_fmadd_ps(load8(wr + c + 8), _mm256_loadu_ps(x + c + 8), a1);
      a2 = _mm256_fmadd_ps(load8(wr + c + 16), _mm256_loadu_ps(x + c + 16), a2);
      a3 = _mm256_fmadd_ps(load8(wr + c + 24), _mm256_loadu_ps(x + c + 24), a3);
    }
    for (; c < vec_end; c += 8)
      a0 = _mm256_fmadd_ps(load8(wr + c), _mm256_loadu_ps(x + c), a0);
    float s = horizontal_sum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; c < cols; ++c)
      s += to_float(wr[c]) * x[c];
    y[r] = s;
  }
}

// y[i, r] for r in [r0, r1), i in [0, m): dot(x[i], W[r]), four activation rows per pass over a
// row of W (which stays in L1 between passes).
template <typename T>
OPTKIT_AVX2 void
dot_rows_avx2(const T* w, std::int64_t cols, std::int64_t r0, std::int64_t r1, const float* x, std::int64_t m, float* y,
              std::int64_t ldy) {
  if (m == 1) {
    dot_rows_avx2_single(w, cols, r0, r1, x, y);
    return;
  }
  const std::int64_t vec_end = cols - cols % 8;
  for (std::int64_t r = r0; r < r1; ++r) {
    const T* wr = w + r * cols;
    for (std::int64_t i0 = 0; i0 < m; i0 += 4) {
      const std::int64_t n = std::min<std::int64_t>(4, m - i0);
      const float* x0 = x + i0 * cols;
      const float* x1 = x0 + (n > 1 ? cols : 0);
      const float* x2 = x0 + (n > 2 ? 2 * cols : 0);
      const float* x3 = x0 + (n > 3 ? 3 * cols : 0);
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
      for (std::int64_t c = 0; c < vec_end; c += 8) {
        const __m256 wv = load8(wr + c);
        a0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + c), a0);
        a1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x1 + c), a1);
        a2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x2 + c), a2);
        a3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x3 + c), a3);
      }
      float s[4] = {horizontal_sum(a0), horizontal_sum(a1), horizontal_sum(a2), horizontal_sum(a3)};
      for (std::int64_t c = vec_end; c < cols; ++c) {
        const float wv = to_float(wr[c]);
        s[0] += wv * x0[c];
        s[1] += wv * x1[c];
        s[2] += wv * x2[c];
        s[3] += wv * x3[c];
      }
      for (std::int64_t k = 0; k < n; ++k)
        y[(i0 + k) * ldy + r] = s[k];
    }
  }
}

template <typename T>
void
dot_rows_scalar(const T* w, std::int64_t cols, std::int64_t r0, std::int64_t r1, const float* x, std::int64_t m,
                float* y, std::int64_t ldy) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const T* wr = w + r * cols;
    for (std::int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * cols;
      float s = 0.0f;
      for (std::int64_t c = 0; c < cols; ++c)
        s += to_float(wr[c]) * xi[c];
      y[i * ldy + r] = s;
    }
  }
}

// AVX2 + FMA + F16C kernels when the CPU has them, unless OPTKIT_CPU_BASELINE=1 asks for the
// portable loops (the tests run the oracle comparison both ways).
bool
cpu_has_avx2() {
  static const bool has = [] {
    const char* baseline = std::getenv("OPTKIT_CPU_BASELINE");
    if (baseline && std::string_view(baseline) == "1")
      return false;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
    return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
}

template <typename T> class DenseWeight final : public LinearWeight {
public:
  DenseWeight(const T* data, std::int64_t rows, std::int64_t cols, std::string format)
      : m_data(data), m_rows(rows), m_cols(cols), m_format(std::move(format)) {}

  std::int64_t rows() const override { return m_rows; }
  std::int64_t cols() const override { return m_cols; }
  std::string format() const override { return m_format; }
  std::uint64_t storage_bytes() const override { return static_cast<std::uint64_t>(m_rows * m_cols) * sizeof(T); }

  void row(std::int64_t r, float* out) const override {
    const T* wr = m_data + r * m_cols;
    for (std::int64_t c = 0; c < m_cols; ++c)
      out[c] = to_float(wr[c]);
  }

  void multiply(const float* x, std::int64_t m, float* y, ThreadPool& pool) const override {
    if (m >= (std::is_same_v<T, float> ? kBlasMinRows : kWidenedBlasMinRows)) {
      multiply_blas(x, m, y, pool);
      return;
    }
    const bool avx2 = cpu_has_avx2();
    const std::int64_t chunk = std::max<std::int64_t>(16, m_rows / (8 * static_cast<std::int64_t>(pool.size())));
    pool.parallel_for(
        m_rows,
        [&](std::int64_t r0, std::int64_t r1) {
          if (avx2)
            dot_rows_avx2(m_data, m_cols, r0, r1, x, m, y, m_rows);
          else
            dot_rows_scalar(m_data, m_cols, r0, r1, x, m, y, m_rows);
        },
        chunk);
  }

private:
  // Each pool thread takes blocks of W's rows one at a time, widens a block to fp32 in its own buffer
  // when W is not fp32, and multiplies it with single-threaded sgemm into its columns of y.
  void multiply_blas(const float* x, std::int64_t m, float* y, ThreadPool& pool) const {
    if constexpr (std::is_same_v<T, float>)
      multiply_fp32_rows(m_data, m_rows, m_cols, x, m, y, pool);
    else
      multiply_widened(*this, x, m, y, pool);
  }

  const T* m_data;
  std::int64_t m_rows, m_cols;
  std::string m_format;
};

// A weight computed in memory (calibration reconstructions, merged deltas), kept in fp32.
class OwnedDenseWeight final : public LinearWeight {
public:
  OwnedDenseWeight(std::vector<float> data, std::int64_t rows, std::int64_t cols)
      : m_data(std::move(data)), m_view(m_data.data(), rows, cols, "f32") {}
  std::int64_t rows() const override { return m_view.rows(); }
  std::int64_t cols() const override { return m_view.cols(); }
  std::string format() const override { return m_view.format(); }
  std::uint64_t storage_bytes() const override { return m_view.storage_bytes(); }
  void row(std::int64_t r, float* out) const override { m_view.row(r, out); }
  void multiply(const float* x, std::int64_t m, float* y, ThreadPool& pool) const override {
    m_view.multiply(x, m, y, pool);
  }

private:
  std::vector<float> m_data;
  DenseWeight<float> m_view;
};

void
use_single_threaded_blas() {
  // The runtime splits GEMMs across its own threads; OpenBLAS's threads would only compete.
  static std::once_flag single_threaded_blas;
  std::call_once(single_threaded_blas, [] { openblas_set_num_threads(1); });
}

} // namespace

void
multiply_fp32_rows(const float* w, std::int64_t rows, std::int64_t cols, const float* x, std::int64_t m, float* y,
                   ThreadPool& pool) {
  const auto M = static_cast<blasint>(m), K = static_cast<blasint>(cols), N = static_cast<blasint>(rows);
  const std::int64_t blocks = (rows + kGemmBlockRows - 1) / kGemmBlockRows;
  pool.parallel_for(
      blocks,
      [&](std::int64_t b0, std::int64_t b1) {
        for (std::int64_t b = b0; b < b1; ++b) {
          const std::int64_t r0 = b * kGemmBlockRows, n = std::min(kGemmBlockRows, rows - r0);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, static_cast<blasint>(n), K, 1.0f, x, K, w + r0 * cols,
                      K, 0.0f, y + r0, N);
        }
      },
      1);
}

void
multiply_widened(const LinearWeight& weight, const float* x, std::int64_t m, float* y, ThreadPool& pool) {
  const std::int64_t rows = weight.rows(), cols = weight.cols();
  const auto M = static_cast<blasint>(m), K = static_cast<blasint>(cols), N = static_cast<blasint>(rows);
  const std::int64_t blocks = (rows + kGemmBlockRows - 1) / kGemmBlockRows;
  pool.parallel_for(
      blocks,
      [&](std::int64_t b0, std::int64_t b1) {
        thread_local std::vector<float> widened; // reused across calls: no page faults per block
        for (std::int64_t b = b0; b < b1; ++b) {
          const std::int64_t r0 = b * kGemmBlockRows, n = std::min(kGemmBlockRows, rows - r0);
          widened.resize(static_cast<std::size_t>(n * cols));
          for (std::int64_t r = 0; r < n; ++r)
            weight.row(r0 + r, widened.data() + r * cols);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, static_cast<blasint>(n), K, 1.0f, x, K,
                      widened.data(), K, 0.0f, y + r0, N);
        }
      },
      1);
}

std::unique_ptr<LinearWeight>
make_owned_dense_weight(std::vector<float> data, std::int64_t rows, std::int64_t cols) {
  use_single_threaded_blas();
  if (static_cast<std::int64_t>(data.size()) != rows * cols)
    throw InputError("owned dense weight: " + std::to_string(data.size()) + " values for " + std::to_string(rows) +
                     "x" + std::to_string(cols));
  return std::make_unique<OwnedDenseWeight>(std::move(data), rows, cols);
}

std::unique_ptr<LinearWeight>
make_dense_weight(DType dtype, std::span<const std::byte> bytes, std::int64_t rows, std::int64_t cols) {
  use_single_threaded_blas();
  if (static_cast<std::uint64_t>(rows * cols) * model::dtype_size(dtype) != bytes.size())
    throw InputError("dense weight of " + std::to_string(rows) + "x" + std::to_string(cols) + " " +
                     std::string(model::dtype_name(dtype)) + " does not match its " + std::to_string(bytes.size()) +
                     " bytes");
  switch (dtype) {
  case DType::f32:
    return std::make_unique<DenseWeight<float>>(reinterpret_cast<const float*>(bytes.data()), rows, cols, "f32");
  case DType::bf16:
    return std::make_unique<DenseWeight<Bf16>>(reinterpret_cast<const Bf16*>(bytes.data()), rows, cols, "bf16");
  case DType::f16:
    return std::make_unique<DenseWeight<F16>>(reinterpret_cast<const F16*>(bytes.data()), rows, cols, "f16");
  default:
    throw InputError("a dense weight must be F32, BF16 or F16, not " + std::string(model::dtype_name(dtype)));
  }
}

} // namespace optkit::runtime
