// AVX2 + FMA + F16C row-dot kernels, and AVX-512F for one activation row (batch-1 decode), chosen
// by CPUID (x86-64 builds only; see dot_rows.hpp). OPTKIT_CPU_BASELINE=1 in the environment selects
// the portable loops on such a CPU (the tests run the oracle comparison both ways).
#include "runtime/dot_rows.hpp"
#include "runtime/x86_features.hpp"

#include <algorithm>
#include <cpuid.h>
#include <immintrin.h>
#include <type_traits>
#include <vector>

namespace optkit::runtime {

namespace {

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

// --- AVX-512F: batch-1 decode (one activation row), where W streams from memory once per token.
#define OPTKIT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

OPTKIT_AVX512 inline __m512
load16(const float* p, __mmask16 valid) {
  return _mm512_maskz_loadu_ps(valid, p);
}
OPTKIT_AVX512 inline __m512
load16(const Bf16* p, __mmask16 valid) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(valid, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}
OPTKIT_AVX512 inline __m512
load16(const F16* p, __mmask16 valid) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(valid, p));
}

// y[r .. r + R) = W[r .. r + R) · x: R rows of W stream side by side against one load of x, two
// accumulators per row (2R independent FMA chains), a masked tail for any cols. With
// prefetch_next, the next group's rows are fetched into L2 at the same column: the hardware
// streamer stops at every 4 KiB page (a 2048-column BF16 row is one), so without it each group
// starts with 8 cold streams (batch-1 decode of a 1B model: 25.5 -> 28.5 GB/s on 2 cores).
template <std::size_t R, typename T>
OPTKIT_AVX512 void
dot_row_group_avx512(const T* w, std::int64_t cols, std::int64_t r, const float* x, float* y, bool prefetch_next) {
  __m512 acc[R][2];
  for (std::size_t k = 0; k < R; ++k)
    acc[k][0] = acc[k][1] = _mm512_setzero_ps();
  for (std::int64_t c = 0; c < cols; c += 32) {
    const __mmask16 m0 = first_lanes(cols - c), m1 = first_lanes(cols - c - 16);
    const __m512 x0 = _mm512_maskz_loadu_ps(m0, x + c), x1 = _mm512_maskz_loadu_ps(m1, x + c + 16);
    for (std::size_t k = 0; k < R; ++k) {
      if (prefetch_next) {
        const T* next = w + (r + static_cast<std::int64_t>(R + k)) * cols + c;
        _mm_prefetch(reinterpret_cast<const char*>(next), _MM_HINT_T1);
        _mm_prefetch(reinterpret_cast<const char*>(next + 16), _MM_HINT_T1);
      }
      const T* wr = w + (r + static_cast<std::int64_t>(k)) * cols + c;
      acc[k][0] = _mm512_fmadd_ps(load16(wr, m0), x0, acc[k][0]);
      acc[k][1] = _mm512_fmadd_ps(load16(wr + 16, m1), x1, acc[k][1]);
    }
  }
  for (std::size_t k = 0; k < R; ++k)
    y[r + static_cast<std::int64_t>(k)] = _mm512_reduce_add_ps(_mm512_add_ps(acc[k][0], acc[k][1]));
}

// BF16 W read 32 values (64 bytes) per load and never widened lane by lane: each 32-bit lane holds
// an even element in its low half and the next odd one in its high half, so a shift gives the even
// elements as fp32 and a mask the odd ones, against x split once per call into the same order
// (`pairs`: per 32 columns, 16 even then 16 odd, zero-padded).
OPTKIT_AVX512 void
split_even_odd(const float* x, std::int64_t cols, float* pairs) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (std::int64_t c = 0; c < cols; c += 32) {
    const __m512 x0 = _mm512_maskz_loadu_ps(first_lanes(cols - c), x + c);
    const __m512 x1 = _mm512_maskz_loadu_ps(first_lanes(cols - c - 16), x + c + 16);
    _mm512_storeu_ps(pairs + c, _mm512_permutex2var_ps(x0, even, x1));
    _mm512_storeu_ps(pairs + c + 16, _mm512_permutex2var_ps(x0, odd, x1));
  }
}

template <std::size_t R>
OPTKIT_AVX512 void
dot_row_group_bf16_pairs(const Bf16* w, std::int64_t cols, std::int64_t r, const float* pairs, float* y,
                         bool prefetch_next) {
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  __m512 acc[R][2];
  for (std::size_t k = 0; k < R; ++k)
    acc[k][0] = acc[k][1] = _mm512_setzero_ps();
  for (std::int64_t c = 0; c < cols; c += 32) {
    const std::int64_t left = cols - c;
    const auto mask = static_cast<__mmask32>(left >= 32 ? 0xffffffffu : (1u << left) - 1);
    const __m512 x_even = _mm512_loadu_ps(pairs + c), x_odd = _mm512_loadu_ps(pairs + c + 16);
    for (std::size_t k = 0; k < R; ++k) {
      if (prefetch_next)
        _mm_prefetch(reinterpret_cast<const char*>(w + (r + static_cast<std::int64_t>(R + k)) * cols + c), _MM_HINT_T1);
      const __m512i v = _mm512_maskz_loadu_epi16(mask, w + (r + static_cast<std::int64_t>(k)) * cols + c);
      acc[k][0] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), x_even, acc[k][0]);
      acc[k][1] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(v, high)), x_odd, acc[k][1]);
    }
  }
  for (std::size_t k = 0; k < R; ++k)
    y[r + static_cast<std::int64_t>(k)] = _mm512_reduce_add_ps(_mm512_add_ps(acc[k][0], acc[k][1]));
}

template <typename T>
OPTKIT_AVX512 void
dot_rows_avx512_single(const T* w, std::int64_t cols, std::int64_t r0, std::int64_t r1, const float* x, float* y) {
  std::int64_t r = r0;
  if constexpr (std::is_same_v<T, Bf16>) {
    thread_local std::vector<float> pairs;
    pairs.resize(static_cast<std::size_t>((cols + 31) / 32 * 32));
    split_even_odd(x, cols, pairs.data());
    for (; r + 8 <= r1; r += 8)
      dot_row_group_bf16_pairs<8>(w, cols, r, pairs.data(), y, r + 16 <= r1);
    for (; r < r1; ++r)
      dot_row_group_bf16_pairs<1>(w, cols, r, pairs.data(), y, false);
    return;
  }
  for (; r + 8 <= r1; r += 8)
    dot_row_group_avx512<8>(w, cols, r, x, y, r + 16 <= r1);
  for (; r < r1; ++r)
    dot_row_group_avx512<1>(w, cols, r, x, y, false);
}

bool
cpu_has_avx2() {
  static const bool has = [] {
    if (cpu_baseline_forced())
      return false;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
    return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
}

} // namespace

template <typename T>
void
dot_rows(const T* w, std::int64_t cols, std::int64_t r0, std::int64_t r1, const float* x, std::int64_t m, float* y,
         std::int64_t ldy) {
  if (m == 1 && cpu_has_avx512())
    dot_rows_avx512_single(w, cols, r0, r1, x, y);
  else if (cpu_has_avx2())
    dot_rows_avx2(w, cols, r0, r1, x, m, y, ldy);
  else
    dot_rows_loops(w, cols, r0, r1, x, m, y, ldy);
}
template void dot_rows(const float*, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, float*,
                       std::int64_t);
template void dot_rows(const Bf16*, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, float*,
                       std::int64_t);
template void dot_rows(const F16*, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, float*,
                       std::int64_t);

const char*
dot_rows_kernel() {
  return cpu_has_avx512() ? "avx512 (one activation row), avx2" : cpu_has_avx2() ? "avx2" : "portable";
}

} // namespace optkit::runtime
