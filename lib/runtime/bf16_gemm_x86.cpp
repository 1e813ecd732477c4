// AVX512_BF16 kernels of bf16_gemm.hpp (x86-64 builds; chosen at run time by CPUID).
//
// A tile of MR activation rows × NR weight rows keeps MR·NR fp32 accumulators in zmm registers and
// walks K 32 values at a time: each step loads NR slices of W straight from its BF16 rows and MR
// slices of the packed activations, and issues MR·NR VDPBF16PS (rounded encoding) or twice that
// (split encoding, where each W slice is first paired with itself by two unpacks). Each
// accumulator is reduced horizontally once, at the end of K. Rows of W are read in place (no
// packing, no widening), so a thread's share of W streams from memory once per product while the
// activations, shared by all threads, stay in cache.
#include "runtime/bf16_gemm.hpp"

#include <algorithm>
#include <cstdlib>
#include <immintrin.h>
#include <stdexcept>
#include <string_view>

// GCC 12's AVX-512 headers build some results from self-initialized "undefined" vectors, which
// -Wuninitialized reports once they are inlined here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace optkit::runtime {

namespace {

#define OPTKIT_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

constexpr std::int64_t kStep = 32; // k values per step: one zmm of BF16 weights

// Which 32-bit words of two natural-order vectors (x[k..k+15], x[k+16..k+31], as hi|lo words) land
// in the split encoding's two vectors: _mm512_unpacklo/hi_epi16(w, w) pair w[8j+t] with itself
// for t = 0..3 (lo) and t = 4..7 (hi) within each 128-bit lane j.
alignas(64) constexpr std::int32_t kSplitLo[16] = {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27};
alignas(64) constexpr std::int32_t kSplitHi[16] = {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31};

OPTKIT_AVX512BF16 inline __m512
load16(const float* p, std::int64_t valid) {
  if (valid >= 16)
    return _mm512_loadu_ps(p);
  return valid <= 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << valid) - 1), p);
}

// 16 floats as 32-bit words: bf16(x) in the low half, bf16(x - bf16(x)) in the high half.
OPTKIT_AVX512BF16 inline __m512i
split_words(__m512 x) {
  const __m256bh hi = _mm512_cvtneps_pbh(x);
  const __m512 hi_f = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(hi)), 16));
  const __m256bh lo = _mm512_cvtneps_pbh(_mm512_sub_ps(x, hi_f));
  return _mm512_or_si512(_mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(hi)),
                         _mm512_slli_epi32(_mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(lo)), 16));
}

OPTKIT_AVX512BF16 void
pack_rows(const float* x, std::int64_t m, std::int64_t cols, PackedActivations& out) {
  const __m512i split_lo = _mm512_load_si512(kSplitLo), split_hi = _mm512_load_si512(kSplitHi);
  for (std::int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * cols;
    std::uint32_t* wi = out.words.data() + i * out.row_words;
    for (std::int64_t k = 0, s = 0; k < cols; k += kStep, ++s) {
      const __m512 f0 = load16(xi + k, cols - k), f1 = load16(xi + k + 16, cols - k - 16);
      if (out.encoding == Bf16Activations::rounded) {
        _mm512_storeu_si512(wi + s * 16, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(f1, f0)));
      } else {
        const __m512i d0 = split_words(f0), d1 = split_words(f1);
        _mm512_storeu_si512(wi + s * 32, _mm512_permutex2var_epi32(d0, split_lo, d1));
        _mm512_storeu_si512(wi + s * 32 + 16, _mm512_permutex2var_epi32(d0, split_hi, d1));
      }
    }
  }
}

OPTKIT_AVX512BF16 inline __m512i
load_weights(const Bf16* w, std::int64_t valid) {
  if (valid >= kStep)
    return _mm512_loadu_si512(w);
  return _mm512_maskz_loadu_epi16(static_cast<__mmask32>((std::uint64_t{1} << valid) - 1), w);
}

OPTKIT_AVX512BF16 inline float
horizontal_sum(__m512 v) {
  const __m512 a = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m512 b = _mm512_add_ps(a, _mm512_shuffle_f32x4(a, a, _MM_SHUFFLE(2, 3, 0, 1)));
  const __m512 c = _mm512_add_ps(b, _mm512_permute_ps(b, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm512_cvtss_f32(_mm512_add_ps(c, _mm512_permute_ps(c, _MM_SHUFFLE(2, 3, 0, 1))));
}

OPTKIT_AVX512BF16 inline __m512
dot(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
}

// y[i, r] for MR activation rows from x_rows and NR weight rows from w_rows, over all of K.
template <std::size_t MR, std::size_t NR, bool Split>
OPTKIT_AVX512BF16 void
tile(const Bf16* const* w_rows, std::int64_t cols, const std::uint32_t* const* x_rows, float* const* y_rows,
     std::int64_t r) {
  __m512 acc[MR][NR];
#pragma GCC unroll 8
  for (std::size_t i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (std::size_t j = 0; j < NR; ++j)
      acc[i][j] = _mm512_setzero_ps();
  constexpr std::int64_t words = Split ? 32 : 16; // packed activation words per step
  for (std::int64_t k = 0, s = 0; k < cols; k += kStep, ++s) {
    if constexpr (Split) {
      __m512i xa[MR], xb[MR];
#pragma GCC unroll 8
      for (std::size_t i = 0; i < MR; ++i) {
        xa[i] = _mm512_loadu_si512(x_rows[i] + s * words);
        xb[i] = _mm512_loadu_si512(x_rows[i] + s * words + 16);
      }
#pragma GCC unroll 8
      for (std::size_t j = 0; j < NR; ++j) {
        const __m512i wv = load_weights(w_rows[j] + k, cols - k);
        const __m512i lo = _mm512_unpacklo_epi16(wv, wv), hi = _mm512_unpackhi_epi16(wv, wv);
#pragma GCC unroll 8
        for (std::size_t i = 0; i < MR; ++i)
          acc[i][j] = dot(dot(acc[i][j], xa[i], lo), xb[i], hi);
      }
    } else {
      __m512i xa[MR];
#pragma GCC unroll 8
      for (std::size_t i = 0; i < MR; ++i)
        xa[i] = _mm512_loadu_si512(x_rows[i] + s * words);
#pragma GCC unroll 8
      for (std::size_t j = 0; j < NR; ++j) {
        const __m512i wv = load_weights(w_rows[j] + k, cols - k);
#pragma GCC unroll 8
        for (std::size_t i = 0; i < MR; ++i)
          acc[i][j] = dot(acc[i][j], xa[i], wv);
      }
    }
  }
  for (std::size_t i = 0; i < MR; ++i)
    for (std::size_t j = 0; j < NR; ++j)
      y_rows[i][r + static_cast<std::int64_t>(j)] = horizontal_sum(acc[i][j]);
}

// Register budget (32 zmm): rounded 4×6 tiles use 24 accumulators + 4 activations + 1 weight;
// split 3×6 tiles use 18 + 6 activations + 3 weight vectors.
template <bool Split> struct TileShape;
template <> struct TileShape<false> { static constexpr std::size_t mr = 4, nr = 6; };
template <> struct TileShape<true> { static constexpr std::size_t mr = 3, nr = 6; };

template <std::size_t MR, std::size_t NR, bool Split>
void
tile_dispatch(std::size_t mr, std::size_t nr, const Bf16* const* w_rows, std::int64_t cols,
              const std::uint32_t* const* x_rows, float* const* y_rows, std::int64_t r) {
  if constexpr (MR > 1) {
    if (mr < MR)
      return tile_dispatch<MR - 1, NR, Split>(mr, nr, w_rows, cols, x_rows, y_rows, r);
  }
  if constexpr (NR > 1) {
    if (nr < NR)
      return tile_dispatch<MR, NR - 1, Split>(mr, nr, w_rows, cols, x_rows, y_rows, r);
  }
  tile<MR, NR, Split>(w_rows, cols, x_rows, y_rows, r);
}

template <bool Split>
void
gemm_rows(const Bf16* w, std::int64_t r0, std::int64_t r1, const PackedActivations& x, float* y, std::int64_t ldy) {
  constexpr std::size_t MR = TileShape<Split>::mr, NR = TileShape<Split>::nr;
  const Bf16* w_rows[NR];
  const std::uint32_t* x_rows[MR];
  float* y_rows[MR];
  constexpr auto tile_rows = static_cast<std::int64_t>(NR), tile_activations = static_cast<std::int64_t>(MR);
  for (std::int64_t r = r0; r < r1; r += tile_rows) {
    const auto nr = static_cast<std::size_t>(std::min(tile_rows, r1 - r));
    for (std::size_t j = 0; j < nr; ++j)
      w_rows[j] = w + (r + static_cast<std::int64_t>(j)) * x.cols;
    for (std::int64_t i0 = 0; i0 < x.m; i0 += tile_activations) {
      const auto mr = static_cast<std::size_t>(std::min(tile_activations, x.m - i0));
      for (std::size_t i = 0; i < mr; ++i) {
        x_rows[i] = x.words.data() + (i0 + static_cast<std::int64_t>(i)) * x.row_words;
        y_rows[i] = y + (i0 + static_cast<std::int64_t>(i)) * ldy;
      }
      tile_dispatch<MR, NR, Split>(mr, nr, w_rows, x.cols, x_rows, y_rows, r);
    }
  }
}

} // namespace

bool
bf16_gemm_supported() {
  static const bool has = [] {
    const char* baseline = std::getenv("OPTKIT_CPU_BASELINE");
    if (baseline && std::string_view(baseline) == "1")
      return false;
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
  }();
  return has;
}

PackedActivations
pack_activations(const float* x, std::int64_t m, std::int64_t cols, Bf16Activations encoding) {
  if (!bf16_gemm_supported())
    throw std::logic_error("pack_activations: this CPU has no AVX512_BF16; check bf16_gemm_supported() first");
  PackedActivations out;
  out.encoding = encoding;
  out.m = m;
  out.cols = cols;
  const std::int64_t steps = (cols + kStep - 1) / kStep;
  out.row_words = steps * (encoding == Bf16Activations::split ? 32 : 16);
  out.words.resize(static_cast<std::size_t>(m * out.row_words));
  pack_rows(x, m, cols, out);
  return out;
}

void
bf16_gemm_rows(const Bf16* w, std::int64_t r0, std::int64_t r1, const PackedActivations& x, float* y,
               std::int64_t ldy) {
  if (x.encoding == Bf16Activations::split)
    gemm_rows<true>(w, r0, r1, x, y, ldy);
  else
    gemm_rows<false>(w, r0, r1, x, y, ldy);
}

} // namespace optkit::runtime
