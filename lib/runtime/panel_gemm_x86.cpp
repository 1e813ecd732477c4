// AVX-512 and AMX kernels of panel_gemm.hpp (x86-64 builds; chosen at run time by CPUID).
//
// Outer-product blocking, as BLAS kernels do: a thread takes W 64 rows at a time and, per block of
// 128 packed words along K, transposes that 64 x 128 slice into an L1-resident panel (word p of
// the 64 rows side by side: four zmm). A register tile of up to 6 activation rows × 64 W rows
// keeps 24 fp32 accumulators; each packed word step loads the panel's four vectors, broadcasts one
// activation word per row and issues 24 VDPBF16PS (BF16 W) or 24 FMAs (F32 W). Each K block's sums
// start from zero and are added to y once the block is done (as BLAS kernels add each K block's
// product to C: no fp32 chain runs longer than a block), so no horizontal sums are needed. The
// activations, packed once per product and shared by all threads, stay in L2; W streams from
// memory once per product. Where the CPU has AMX-BF16, the BF16 products multiply 32-row panels
// and the same activations as 16 x 16 tiles instead (see amx_gemm_rows). Elsewhere a BF16 W is
// packed into its panels once (pack_weight_panels, at load) and the same register tiles read them
// in place (packed_gemm_rows): 128 x 8192 x 2048 on 2 Zen 5 cores, W from memory, runs at 880
// GFLOP/s rounded and 450 split, against 620-720 and 375-400 with the panels packed per product.
#include "runtime/packed_panels.hpp"
#include "runtime/panel_gemm.hpp"
#include "runtime/x86_features.hpp"

#include <algorithm>
#include <cpuid.h>
#include <immintrin.h>
#include <stdexcept>
#include <sys/syscall.h>
#include <type_traits>
#include <unistd.h>

namespace optkit::runtime {

namespace {

// Every function here may use AVX512_BF16; only the BF16 intrinsics emit its instructions, so the
// F32 product runs wherever AVX-512F/BW/VL do (panel_gemm_supported(PanelProduct::f32)).
#define OPTKIT_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

constexpr std::int64_t kStep = 32; // activations converted 32 at a time
// The AVX-512 register tiles: kTileRows activation rows x kTileVectors vectors of 16 W rows, 24
// accumulators. Each packed word step broadcasts one activation word per row; a broadcast costs
// the dot-product pipes about two-thirds of a cycle on Zen 5, so few rows and wide panels win
// (128 x 8192 x 2048 on 2 Zen 5 cores, against 12 rows x 32 W rows: split 227 -> 293-330 GFLOP/s,
// rounded 415-507 -> 530-630; 4 x 96, 8 x 48 and 5 x 64 measured no better).
constexpr std::int64_t kTileVectors = 4;
constexpr std::size_t kTileRows = 6;
constexpr std::size_t kWidenedTileRows = 3;   // fp32 activations over packed panels: 12 accumulators
constexpr std::int64_t kBlockWords = 128;     // packed words per K block: a 32 KiB panel of 64 W rows
constexpr std::int64_t kAmxPanelRows = 32;    // AMX: W rows per panel, two B tiles of 16
constexpr std::int64_t kAmxBlockWords = 1024; // the same for AMX tiles: 128 KiB panels, fewer C reloads
constexpr std::int64_t kAmxGroupPanels = 4;   // panels multiplied per pass over the activations
constexpr std::size_t kAmxTailRows = 12;      // AMX: register-tile rows for activation rows short of a tile
constexpr std::int64_t kLaneRows = 32;        // f32_transposed: activation rows per pair of vectors
constexpr std::int64_t kBroadcastRows = 12;   // f32_transposed: W rows per register tile (24 accumulators)
constexpr std::int64_t kBroadcastBlock = 256; // f32_transposed: columns per K block

OPTKIT_AVX512BF16 inline __m512
load16(const float* p, std::int64_t valid) {
  if (valid >= 16)
    return _mm512_loadu_ps(p);
  return valid <= 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << valid) - 1), p);
}

// 16 floats as 32-bit words: bf16(x) in the low half, bf16(x - bf16(x)) in the high half.
OPTKIT_AVX512BF16 inline __m512i
split_words(__m512 x) {
  const __m512i hi = _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x)));
  const __m512 hi_f = _mm512_castsi512_ps(_mm512_slli_epi32(hi, 16));
  const __m512i lo = _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_sub_ps(x, hi_f))));
  return _mm512_or_si512(hi, _mm512_slli_epi32(lo, 16));
}

// 32 floats as 32 words, rounded pairs and what rounding left: word 2p = bf16(x[2p]) |
// bf16(x[2p+1]) << 16, word 2p + 1 the same of x - bf16(x) (the packed panels' split encoding).
OPTKIT_AVX512BF16 inline void
store_split_pairs(__m512 f0, __m512 f1, std::uint32_t* out) {
  const __m512i hi = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(f1, f0));
  const __m512 hi0 = _mm512_castsi512_ps(_mm512_slli_epi32(hi, 16));
  const __m512 hi1 = _mm512_castsi512_ps(_mm512_and_si512(hi, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  // hi's word p holds x[2p] (low) and x[2p+1] (high): even and odd elements, not f0 and f1.
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512 x_even = _mm512_permutex2var_ps(f0, even, f1), x_odd = _mm512_permutex2var_ps(f0, odd, f1);
  const __m512i lo =
      reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_sub_ps(x_odd, hi1), _mm512_sub_ps(x_even, hi0)));
  // lo holds 16 even residuals then 16 odd ones as bf16: pair them as words (16-bit index j of
  // the even one in word j's low half, 16 + j in its high half).
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i pair_index =
      _mm512_or_si512(lane, _mm512_slli_epi32(_mm512_add_epi32(lane, _mm512_set1_epi32(16)), 16));
  const __m512i lo_pairs = _mm512_permutexvar_epi16(pair_index, lo);
  const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i second = _mm512_add_epi32(first, _mm512_set1_epi32(8));
  _mm512_storeu_si512(out, _mm512_permutex2var_epi32(hi, first, lo_pairs));
  _mm512_storeu_si512(out + 16, _mm512_permutex2var_epi32(hi, second, lo_pairs));
}

// Rounded: word p = bf16(x[2p]) | bf16(x[2p+1]) << 16. Split: word k = hi(x[k]) | lo(x[k]) << 16,
// or for the packed panels rounded pairs and residual pairs alternating (store_split_pairs).
// F32: word k = the bits of x[k].
OPTKIT_AVX512BF16 void
pack_rows(const float* x, std::int64_t m, std::int64_t cols, PackedActivations& out) {
  const bool split_pairs = out.kernel == PanelKernel::avx512_packed;
  for (std::int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * cols;
    std::uint32_t* wi = out.words.data() + i * out.row_words;
    for (std::int64_t k = 0; k < cols; k += kStep) {
      const __m512 f0 = load16(xi + k, cols - k), f1 = load16(xi + k + 16, cols - k - 16);
      switch (out.product) {
      case PanelProduct::bf16_rounded:
        _mm512_storeu_si512(wi + k / 2, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(f1, f0)));
        break;
      case PanelProduct::bf16_split:
        if (split_pairs) {
          store_split_pairs(f0, f1, wi + k);
          break;
        }
        _mm512_storeu_si512(wi + k, split_words(f0));
        _mm512_storeu_si512(wi + k + 16, split_words(f1));
        break;
      case PanelProduct::f32:
        _mm512_storeu_si512(wi + k, _mm512_castps_si512(f0));
        _mm512_storeu_si512(wi + k + 16, _mm512_castps_si512(f1));
        break;
      }
    }
  }
}

// 16 packed words of one W row from word p on (zeros past the row's end).
OPTKIT_AVX512BF16 inline __m512i
row_words(const float* row, std::int64_t cols, std::int64_t p, PanelProduct) {
  return _mm512_castps_si512(load16(row + p, cols - p));
}

OPTKIT_AVX512BF16 inline __m512i
row_words(const Bf16* row, std::int64_t cols, std::int64_t p, PanelProduct product) {
  if (product == PanelProduct::bf16_rounded) { // 32 bf16 from element 2p, read as 16 pairs
    const std::int64_t valid = std::clamp<std::int64_t>(cols - 2 * p, 0, 32);
    return _mm512_maskz_loadu_epi16(static_cast<__mmask32>((std::uint64_t{1} << valid) - 1), row + 2 * p);
  }
  // Split: 16 bf16 from element p, each paired with itself.
  const std::int64_t valid = std::clamp<std::int64_t>(cols - p, 0, 16);
  const __m256i w = _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << valid) - 1), row + p);
  const __m512i wide = _mm512_cvtepu16_epi32(w);
  return _mm512_or_si512(wide, _mm512_slli_epi32(wide, 16));
}

// The first W element of packed word p: two BF16 values per word when rounded, else one value.
inline std::int64_t
element_of_word(std::int64_t p, PanelProduct product) {
  return product == PanelProduct::bf16_rounded ? 2 * p : p;
}

// In place: r[i] (16 words of row i) become c[j] (word j of the 16 rows).
OPTKIT_AVX512BF16 inline void
transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // r[4i + j], lane L: rows 4i..4i+3 of word 4L + j.
  for (int i = 0; i < 4; ++i) {
    r[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i + 0], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i + 0], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  // A 4 x 4 transpose of 128-bit lanes for each j.
  for (int j = 0; j < 4; ++j) {
    const __m512i b0 = _mm512_shuffle_i32x4(r[j], r[4 + j], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i b1 = _mm512_shuffle_i32x4(r[j], r[4 + j], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i b2 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i b3 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], _MM_SHUFFLE(3, 2, 3, 2));
    t[0 + j] = _mm512_shuffle_i32x4(b0, b2, _MM_SHUFFLE(2, 0, 2, 0));
    t[4 + j] = _mm512_shuffle_i32x4(b0, b2, _MM_SHUFFLE(3, 1, 3, 1));
    t[8 + j] = _mm512_shuffle_i32x4(b1, b3, _MM_SHUFFLE(2, 0, 2, 0));
    t[12 + j] = _mm512_shuffle_i32x4(b1, b3, _MM_SHUFFLE(3, 1, 3, 1));
  }
  for (int i = 0; i < 16; ++i)
    r[i] = t[i];
}

// panel[p][n] := packed word p0 + p of W row n0 + n, for p < words, n < 16·NV (rows past `valid`
// are 0): NV vectors of 16 W rows per packed word.
template <std::int64_t NV, typename T>
OPTKIT_AVX512BF16 void
pack_panel(const T* w, std::int64_t cols, std::int64_t n0, std::int64_t valid, std::int64_t p0, std::int64_t words,
           std::int64_t block, PanelProduct product, std::uint32_t* panel) {
  constexpr std::int64_t panel_rows = 16 * NV;
  __m512i r[16];
  for (std::int64_t vector = 0; vector < NV; ++vector)
    for (std::int64_t p = 0; p < words; p += 16) {
      for (std::int64_t i = 0; i < 16; ++i) {
        const std::int64_t n = vector * 16 + i;
        if (n >= valid) {
          r[i] = _mm512_setzero_si512();
          continue;
        }
        const T* row = w + (n0 + n) * cols;
        r[i] = row_words(row, cols, p0 + p, product);
        // The same row one K block on, which the next pack_panel reads: 32 or more rows are too many
        // interleaved streams for the hardware prefetcher to keep W streaming at full bandwidth.
        _mm_prefetch(reinterpret_cast<const char*>(row + element_of_word(p0 + p + block, product)), _MM_HINT_T0);
      }
      transpose16(r);
      for (std::int64_t j = 0; j < 16 && p + j < words; ++j)
        _mm512_storeu_si512(panel + (p + j) * panel_rows + vector * 16, r[j]);
    }
}

// acc += a · w per lane: BF16 pair products (Fma false) or fp32 multiply-adds (Fma true).
template <bool Fma>
OPTKIT_AVX512BF16 inline __m512
dot(__m512 acc, __m512i a, __m512i w) {
  if constexpr (Fma)
    return _mm512_fmadd_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(w), acc);
  else
    return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(w));
}

// y[lanes] = acc, or += acc after the first K block (each block's sums start from zero).
OPTKIT_AVX512BF16 inline void
store_sums(float* y, __mmask16 lanes, __m512 acc, bool accumulate) {
  _mm512_mask_storeu_ps(y, lanes, accumulate ? _mm512_add_ps(acc, _mm512_maskz_loadu_ps(lanes, y)) : acc);
}

// y_rows[i][0..valid) (+)= Σ_p x_rows[i][p] · panel[p][·] for MR activation rows and a panel of
// NV vectors of 16 W rows. XWords 2 (split activations over packed panels): the activation words
// 2p and 2p + 1 both multiply panel word p, in that order.
template <std::size_t MR, std::int64_t NV, bool Fma, int XWords = 1>
OPTKIT_AVX512BF16 void
tile(const std::uint32_t* panel, std::int64_t words, const std::uint32_t* const* x_rows, float* const* y_rows,
     std::int64_t valid, bool accumulate) {
  constexpr auto nv = static_cast<std::size_t>(NV);
  __mmask16 mask[nv];
  for (std::size_t j = 0; j < nv; ++j)
    mask[j] = first_lanes(valid - 16 * static_cast<std::int64_t>(j)); // W rows before `valid`
  __m512 acc[MR][nv];
#pragma GCC unroll 12
  for (std::size_t i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (std::size_t j = 0; j < nv; ++j)
      acc[i][j] = _mm512_setzero_ps();
  for (std::int64_t p = 0; p < words; ++p) {
    const std::uint32_t* panel_word = panel + p * NV * 16;
    __m512i w[nv];
#pragma GCC unroll 8
    for (std::size_t j = 0; j < nv; ++j)
      w[j] = _mm512_loadu_si512(panel_word + 16 * j);
#pragma GCC unroll 12
    for (std::size_t i = 0; i < MR; ++i) {
      const __m512i a = _mm512_set1_epi32(static_cast<int>(x_rows[i][XWords * p]));
#pragma GCC unroll 8
      for (std::size_t j = 0; j < nv; ++j)
        acc[i][j] = dot<Fma>(acc[i][j], a, w[j]);
      if constexpr (XWords == 2) {
        const __m512i b = _mm512_set1_epi32(static_cast<int>(x_rows[i][2 * p + 1]));
#pragma GCC unroll 8
        for (std::size_t j = 0; j < nv; ++j)
          acc[i][j] = dot<Fma>(acc[i][j], b, w[j]);
      }
    }
  }
#pragma GCC unroll 12
  for (std::size_t i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (std::size_t j = 0; j < nv; ++j)
      store_sums(y_rows[i] + 16 * j, mask[j], acc[i][j], accumulate);
}

// The same over a packed BF16 panel with fp32 activations (two words per panel word: x[2p] and
// x[2p+1]): W's pairs widened to fp32 in registers and multiplied with FMAs, so each product is
// an fp32 one. For a few activation rows, where streaming W bounds the time.
template <std::size_t MR>
OPTKIT_AVX512BF16 void
widened_tile(const std::uint32_t* panel, std::int64_t words, const std::uint32_t* const* x_rows, float* const* y_rows,
             std::int64_t valid, bool accumulate) {
  constexpr std::size_t nv = kTileVectors;
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  __mmask16 mask[nv];
  for (std::size_t j = 0; j < nv; ++j)
    mask[j] = first_lanes(valid - 16 * static_cast<std::int64_t>(j)); // W rows before `valid`
  __m512 acc[MR][nv];
  for (std::size_t i = 0; i < MR; ++i)
    for (std::size_t j = 0; j < nv; ++j)
      acc[i][j] = _mm512_setzero_ps();
  for (std::int64_t p = 0; p < words; ++p) {
    const std::uint32_t* panel_word = panel + p * kTileVectors * 16;
    __m512 even[nv], odd[nv];
#pragma GCC unroll 8
    for (std::size_t j = 0; j < nv; ++j) {
      const __m512i w = _mm512_loadu_si512(panel_word + 16 * j);
      even[j] = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
      odd[j] = _mm512_castsi512_ps(_mm512_and_si512(w, high));
    }
#pragma GCC unroll 4
    for (std::size_t i = 0; i < MR; ++i) {
      const __m512 a = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(x_rows[i][2 * p])));
      const __m512 b = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(x_rows[i][2 * p + 1])));
#pragma GCC unroll 8
      for (std::size_t j = 0; j < nv; ++j)
        acc[i][j] = _mm512_fmadd_ps(odd[j], b, _mm512_fmadd_ps(even[j], a, acc[i][j]));
    }
  }
  for (std::size_t i = 0; i < MR; ++i)
    for (std::size_t j = 0; j < nv; ++j)
      store_sums(y_rows[i] + 16 * j, mask[j], acc[i][j], accumulate);
}

template <std::size_t MR>
void
widened_tile_dispatch(std::size_t mr, const std::uint32_t* panel, std::int64_t words,
                      const std::uint32_t* const* x_rows, float* const* y_rows, std::int64_t valid, bool accumulate) {
  if constexpr (MR > 1) {
    if (mr < MR)
      return widened_tile_dispatch<MR - 1>(mr, panel, words, x_rows, y_rows, valid, accumulate);
  }
  widened_tile<MR>(panel, words, x_rows, y_rows, valid, accumulate);
}

template <std::size_t MR, std::int64_t NV, bool Fma, int XWords>
void
tile_dispatch(std::size_t mr, const std::uint32_t* panel, std::int64_t words, const std::uint32_t* const* x_rows,
              float* const* y_rows, std::int64_t valid, bool accumulate) {
  if constexpr (MR > 1) {
    if (mr < MR)
      return tile_dispatch<MR - 1, NV, Fma, XWords>(mr, panel, words, x_rows, y_rows, valid, accumulate);
  }
  tile<MR, NV, Fma, XWords>(panel, words, x_rows, y_rows, valid, accumulate);
}

// --- AMX (Sapphire Rapids and later): the same packed panels and activations, multiplied as tiles.
// TDPBF16PS computes C[16 x 16] += A[16 x 16 words] · B[16 words x 16] with exactly VDPBF16PS's
// pair products, so a panel's 16-word slice is a B tile as packed (row stride: the panel's 32
// words) and 16 activation rows' words are an A tile (row stride: row_words). All eight tiles are
// 16 rows x 64 bytes: C 2 x 2 (32 activation rows x 32 W rows), two A, two B.

#define OPTKIT_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))

struct alignas(64) TileConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

// A constant in memory: GCC 12 does not see LDTILECFG read its operand, so a configuration built
// on the stack just before it loses its stores.
constexpr TileConfig kTileConfig{1, 0, {}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};

OPTKIT_AMX void
amx_begin() {
  _tile_loadconfig(&kTileConfig);
}

OPTKIT_AMX void
amx_end() {
  _tile_release();
}

// y[i0 + 16·MT rows][n0 .. n0 + 32) (+)= activations · panel for MT (1 or 2) tiles of 16 rows.
template <int MT>
OPTKIT_AMX void
amx_block(const std::uint32_t* panel, std::int64_t words, const std::uint32_t* x0, std::int64_t row_words, float* y0,
          std::int64_t ldy, bool accumulate) {
  const auto x_stride = static_cast<long>(row_words * 4), y_stride = static_cast<long>(ldy * 4);
  if (accumulate) {
    _tile_loadd(0, y0, y_stride);
    _tile_loadd(1, y0 + 16, y_stride);
    if constexpr (MT == 2) {
      _tile_loadd(2, y0 + 16 * ldy, y_stride);
      _tile_loadd(3, y0 + 16 * ldy + 16, y_stride);
    }
  } else {
    _tile_zero(0);
    _tile_zero(1);
    if constexpr (MT == 2) {
      _tile_zero(2);
      _tile_zero(3);
    }
  }
  for (std::int64_t p = 0; p < words; p += 16) {
    _tile_loadd(6, panel + p * kAmxPanelRows, kAmxPanelRows * 4);
    _tile_loadd(7, panel + p * kAmxPanelRows + 16, kAmxPanelRows * 4);
    _tile_loadd(4, x0 + p, x_stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if constexpr (MT == 2) {
      _tile_loadd(5, x0 + 16 * row_words + p, x_stride);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, y0, y_stride);
  _tile_stored(1, y0 + 16, y_stride);
  if constexpr (MT == 2) {
    _tile_stored(2, y0 + 16 * ldy, y_stride);
    _tile_stored(3, y0 + 16 * ldy + 16, y_stride);
  }
}

// CPUID says AMX-TILE and AMX-BF16, and Linux grants this process the tile data state.
bool
cpu_has_amx_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0)
    return false;
  const bool amx_bf16 = (edx & (1u << 22)) != 0, amx_tile = (edx & (1u << 24)) != 0;
  if (!amx_bf16 || !amx_tile)
    return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

bool
amx_available() {
  static const bool has = cpu_has_avx512() && __builtin_cpu_supports("avx512bf16") && cpu_has_amx_bf16();
  return has;
}

// --- f32_transposed: W's values broadcast from its own rows, activations packed transposed.

// out[(b·cols + c)·32 + i] = x[32b + i, c], zero for rows past m: 16 x 16 transposes of x.
OPTKIT_AVX512BF16 void
pack_transposed(const float* x, std::int64_t m, std::int64_t cols, std::uint32_t* out) {
  __m512i r[16];
  for (std::int64_t i0 = 0; i0 < m; i0 += 16) {
    const std::int64_t b = i0 / kLaneRows, lane = i0 % kLaneRows;
    for (std::int64_t c = 0; c < cols; c += 16) {
      for (std::int64_t i = 0; i < 16; ++i)
        r[i] = i0 + i < m ? _mm512_castps_si512(load16(x + (i0 + i) * cols + c, cols - c)) : _mm512_setzero_si512();
      transpose16(r); // r[j]: column c + j of the 16 rows
      for (std::int64_t j = 0; j < 16 && c + j < cols; ++j)
        _mm512_storeu_si512(out + (b * cols + c + j) * kLaneRows + lane, r[j]);
    }
  }
}

// y^T block acc[j][0..32) (+)= Σ_{c ∈ [c0, c1)} W[r + j, c] · x[32b .. 32b + 32, c] for RR W rows.
template <std::size_t RR>
OPTKIT_AVX512BF16 void
broadcast_block(const float* w, std::int64_t cols, std::int64_t r, std::int64_t c0, std::int64_t c1, const float* xt,
                float* acc_out, bool accumulate) {
  __m512 acc[RR][2];
  for (std::size_t j = 0; j < RR; ++j) {
    acc[j][0] = accumulate ? _mm512_loadu_ps(acc_out + j * kLaneRows) : _mm512_setzero_ps();
    acc[j][1] = accumulate ? _mm512_loadu_ps(acc_out + j * kLaneRows + 16) : _mm512_setzero_ps();
  }
  const float* w0 = w + r * cols;
  for (std::int64_t c = c0; c < c1; ++c) {
    const __m512 a0 = _mm512_loadu_ps(xt + c * kLaneRows), a1 = _mm512_loadu_ps(xt + c * kLaneRows + 16);
#pragma GCC unroll 12
    for (std::size_t j = 0; j < RR; ++j) {
      const __m512 wv = _mm512_set1_ps(w0[static_cast<std::int64_t>(j) * cols + c]);
      acc[j][0] = _mm512_fmadd_ps(wv, a0, acc[j][0]);
      acc[j][1] = _mm512_fmadd_ps(wv, a1, acc[j][1]);
    }
  }
  for (std::size_t j = 0; j < RR; ++j) {
    _mm512_storeu_ps(acc_out + j * kLaneRows, acc[j][0]);
    _mm512_storeu_ps(acc_out + j * kLaneRows + 16, acc[j][1]);
  }
}

template <std::size_t RR>
void
broadcast_dispatch(std::size_t rr, const float* w, std::int64_t cols, std::int64_t r, std::int64_t c0, std::int64_t c1,
                   const float* xt, float* acc_out, bool accumulate) {
  if constexpr (RR > 1) {
    if (rr < RR)
      return broadcast_dispatch<RR - 1>(rr, w, cols, r, c0, c1, xt, acc_out, accumulate);
  }
  broadcast_block<RR>(w, cols, r, c0, c1, xt, acc_out, accumulate);
}

// Per K block of kBroadcastBlock columns (the activations' slice, 32·m_pad words, stays in L2),
// every row tile of kBroadcastRows W rows in [r0, r1) passes every 32-row block of activations,
// accumulating y^T for the whole range in a small buffer that is written into y at the end.
void
f32_transposed_rows(const float* w, std::int64_t r0, std::int64_t r1, const PackedActivations& x, float* y,
                    std::int64_t ldy) {
  const std::int64_t blocks = (x.m + kLaneRows - 1) / kLaneRows, cols = x.cols,
                     tiles = (r1 - r0 + kBroadcastRows - 1) / kBroadcastRows;
  const std::int64_t tile_floats = blocks * kBroadcastRows * kLaneRows; // y^T of one row tile
  thread_local std::vector<float> acc;
  acc.resize(static_cast<std::size_t>(tiles * tile_floats));
  const auto* xt = reinterpret_cast<const float*>(x.words.data());
  for (std::int64_t c0 = 0; c0 < cols; c0 += kBroadcastBlock) {
    const std::int64_t c1 = std::min(cols, c0 + kBroadcastBlock);
    for (std::int64_t t = 0; t < tiles; ++t) {
      const std::int64_t r = r0 + t * kBroadcastRows;
      const auto rr = static_cast<std::size_t>(std::min(kBroadcastRows, r1 - r));
      for (std::int64_t b = 0; b < blocks; ++b)
        broadcast_dispatch<static_cast<std::size_t>(kBroadcastRows)>(
            rr, w, cols, r, c0, c1, xt + b * cols * kLaneRows,
            acc.data() + t * tile_floats + b * kBroadcastRows * kLaneRows, c0 > 0);
    }
  }
  for (std::int64_t t = 0; t < tiles; ++t) {
    const std::int64_t r = r0 + t * kBroadcastRows, rr = std::min(kBroadcastRows, r1 - r);
    for (std::int64_t i = 0; i < x.m; ++i) {
      const float* block = acc.data() + t * tile_floats + (i / kLaneRows) * kBroadcastRows * kLaneRows + i % kLaneRows;
      for (std::int64_t j = 0; j < rr; ++j)
        y[i * ldy + r + j] = block[j * kLaneRows];
    }
  }
}

// Activation rows [i_begin, m) of one packed panel's K block (NV vectors of W rows) on AVX-512
// register tiles of MR rows (Widened: fp32 activations against a packed BF16 panel).
template <std::size_t MR, std::int64_t NV, bool Fma, int XWords = 1, bool Widened = false>
void
register_tile_rows(const std::uint32_t* panel, std::int64_t p0, std::int64_t words, const PackedActivations& x,
                   std::int64_t i_begin, float* y, std::int64_t ldy, std::int64_t n0, std::int64_t valid) {
  const std::uint32_t* x_rows[MR];
  float* y_rows[MR];
  for (std::int64_t i0 = i_begin; i0 < x.m; i0 += static_cast<std::int64_t>(MR)) {
    const auto mr = static_cast<std::size_t>(std::min(static_cast<std::int64_t>(MR), x.m - i0));
    for (std::size_t i = 0; i < mr; ++i) {
      const std::int64_t row = i0 + static_cast<std::int64_t>(i);
      x_rows[i] = x.words.data() + row * x.row_words + XWords * p0;
      y_rows[i] = y + row * ldy + n0;
    }
    if constexpr (Widened)
      widened_tile_dispatch<MR>(mr, panel, words, x_rows, y_rows, valid, p0 > 0);
    else
      tile_dispatch<MR, NV, Fma, XWords>(mr, panel, words, x_rows, y_rows, valid, p0 > 0);
  }
}

template <typename T>
void
gemm_rows(const T* w, std::int64_t r0, std::int64_t r1, const PackedActivations& x, float* y, std::int64_t ldy) {
  constexpr bool fma = std::is_same_v<T, float>;
  if (fma != (x.product == PanelProduct::f32))
    throw std::logic_error("panel_gemm_rows: F32 weights need f32 activations, BF16 weights a bf16 encoding");
  constexpr std::int64_t panel_rows = 16 * kTileVectors;
  thread_local std::vector<std::uint32_t> panel(static_cast<std::size_t>(kBlockWords * panel_rows));
  for (std::int64_t n0 = r0; n0 < r1; n0 += panel_rows) {
    const std::int64_t valid = std::min(panel_rows, r1 - n0);
    for (std::int64_t p0 = 0; p0 < x.row_words; p0 += kBlockWords) {
      const std::int64_t words = std::min(kBlockWords, x.row_words - p0);
      pack_panel<kTileVectors>(w, x.cols, n0, valid, p0, words, kBlockWords, x.product, panel.data());
      register_tile_rows<kTileRows, kTileVectors, fma>(panel.data(), p0, words, x, 0, y, ldy, n0, valid);
    }
  }
}

// The panels of W rows [r0, r1) packed at load, K block by K block, on the same register tiles.
void
packed_gemm_rows(const PackedPanels& w, std::int64_t r0, std::int64_t r1, const PackedActivations& x, float* y,
                 std::int64_t ldy) {
  constexpr std::int64_t panel_rows = PackedPanels::kPanelRows;
  if (x.kernel != PanelKernel::avx512_packed || x.cols != w.cols() || r0 % panel_rows != 0 ||
      (r1 % panel_rows != 0 && r1 != w.rows()) || r1 > w.rows())
    throw std::logic_error("panel_gemm_rows: packed panels need activations packed for them and whole panels");
  for (std::int64_t n0 = r0; n0 < r1; n0 += panel_rows) {
    const std::int64_t valid = std::min(panel_rows, r1 - n0);
    const std::uint32_t* panel = w.panel(n0);
    for (std::int64_t p0 = 0; p0 < w.words(); p0 += kBlockWords) {
      const std::int64_t words = std::min(kBlockWords, w.words() - p0);
      const std::uint32_t* block = panel + p0 * panel_rows;
      switch (x.product) {
      case PanelProduct::bf16_rounded:
        register_tile_rows<kTileRows, kTileVectors, false>(block, p0, words, x, 0, y, ldy, n0, valid);
        break;
      case PanelProduct::bf16_split:
        register_tile_rows<kTileRows, kTileVectors, false, 2>(block, p0, words, x, 0, y, ldy, n0, valid);
        break;
      case PanelProduct::f32:
        register_tile_rows<kWidenedTileRows, kTileVectors, true, 2, true>(block, p0, words, x, 0, y, ldy, n0, valid);
        break;
      }
    }
  }
}

// The AMX order: W rows a group of kAmxGroupPanels panels at a time, packed per K block of
// kAmxBlockWords (C tiles are reloaded from y once per block); each 32-row block of activations
// (128 KiB of words per K block) is multiplied by every panel of the group while it sits in L2.
// Activation rows short of a 16-row tile go through AMX too, zero-padded to a tile, so that a
// row's bits never depend on how many rows run beside it (compress's calibration passes and
// AWQ's search compare rows run in different batches). A last panel short of 32 W rows goes
// through the AVX-512 register tiles on the same packed panel, for every activation row alike.
void
amx_gemm_rows(const Bf16* w, std::int64_t r0, std::int64_t r1, const PackedActivations& x, float* y, std::int64_t ldy) {
  thread_local std::vector<std::uint32_t> panels(
      static_cast<std::size_t>(kAmxGroupPanels * kAmxBlockWords * kAmxPanelRows));
  constexpr std::int64_t kPanelWords = kAmxBlockWords * kAmxPanelRows;
  constexpr std::int64_t kTailLdy = kAmxGroupPanels * kAmxPanelRows;
  const std::int64_t tail = x.m % 16, first_tail = x.m - tail;
  // The tail's activation words padded to a tile, and its outputs for one group of panels.
  thread_local std::vector<std::uint32_t> tail_x;
  thread_local std::vector<float> tail_y;
  if (tail > 0) {
    tail_x.assign(static_cast<std::size_t>(16 * x.row_words), 0u);
    std::copy_n(x.words.data() + first_tail * x.row_words, tail * x.row_words, tail_x.data());
    tail_y.resize(static_cast<std::size_t>(16 * kTailLdy));
  }
  amx_begin();
  for (std::int64_t g0 = r0; g0 < r1; g0 += kAmxGroupPanels * kAmxPanelRows) {
    const std::int64_t group_rows = std::min(kAmxGroupPanels * kAmxPanelRows, r1 - g0);
    const std::int64_t group_panels = (group_rows + kAmxPanelRows - 1) / kAmxPanelRows;
    const auto valid = [&](std::int64_t j) { return std::min(kAmxPanelRows, group_rows - j * kAmxPanelRows); };
    for (std::int64_t p0 = 0; p0 < x.row_words; p0 += kAmxBlockWords) {
      const std::int64_t words = std::min(kAmxBlockWords, x.row_words - p0);
      for (std::int64_t j = 0; j < group_panels; ++j)
        pack_panel<2>(w, x.cols, g0 + j * kAmxPanelRows, valid(j), p0, words, kAmxBlockWords, x.product,
                      panels.data() + j * kPanelWords);
      const std::uint32_t* x0 = x.words.data() + p0;
      std::int64_t tiled = 0; // activation rows done by AMX tiles
      for (; tiled + 32 <= x.m; tiled += 32)
        for (std::int64_t j = 0; j < group_panels && valid(j) == kAmxPanelRows; ++j)
          amx_block<2>(panels.data() + j * kPanelWords, words, x0 + tiled * x.row_words, x.row_words,
                       y + tiled * ldy + g0 + j * kAmxPanelRows, ldy, p0 > 0);
      for (; tiled + 16 <= x.m; tiled += 16)
        for (std::int64_t j = 0; j < group_panels && valid(j) == kAmxPanelRows; ++j)
          amx_block<1>(panels.data() + j * kPanelWords, words, x0 + tiled * x.row_words, x.row_words,
                       y + tiled * ldy + g0 + j * kAmxPanelRows, ldy, p0 > 0);
      for (std::int64_t j = 0; j < group_panels; ++j) {
        if (valid(j) < kAmxPanelRows)
          register_tile_rows<kAmxTailRows, 2, false>(panels.data() + j * kPanelWords, p0, words, x, 0, y, ldy,
                                                     g0 + j * kAmxPanelRows, valid(j));
        else if (tail > 0)
          amx_block<1>(panels.data() + j * kPanelWords, words, tail_x.data() + p0, x.row_words,
                       tail_y.data() + j * kAmxPanelRows, kTailLdy, p0 > 0);
      }
    }
    for (std::int64_t i = 0; i < tail; ++i)
      for (std::int64_t j = 0; j < group_panels && valid(j) == kAmxPanelRows; ++j)
        std::copy_n(tail_y.data() + i * kTailLdy + j * kAmxPanelRows, kAmxPanelRows,
                    y + (first_tail + i) * ldy + g0 + j * kAmxPanelRows);
  }
  amx_end();
}

} // namespace

bool
panel_gemm_supported(PanelProduct product) {
  const bool has_f32 = cpu_has_avx512();
  static const bool has_bf16 = has_f32 && __builtin_cpu_supports("avx512bf16");
  return product == PanelProduct::f32 ? has_f32 : has_bf16;
}

const char*
bf16_gemm_kernel_name() {
  const auto kernel = panel_gemm_kernel(PanelProduct::bf16_split);
  return !kernel                                             ? "widened sgemm"
         : *kernel == PanelKernel::amx                       ? "amx_bf16 tiles"
         : panel_packing_preferred(PanelProduct::bf16_split) ? "avx512_bf16, panels packed at load"
                                                             : "avx512_bf16";
}

bool
panel_packing_preferred(PanelProduct product) {
  return product != PanelProduct::f32 && panel_gemm_kernel(product) == PanelKernel::avx512;
}

std::optional<PanelKernel>
panel_gemm_kernel(PanelProduct product, std::int64_t m) {
  if (!panel_gemm_supported(product))
    return std::nullopt;
  if (product == PanelProduct::f32) { // transposed wins unless padding wastes over a quarter of its lanes
    const std::int64_t lanes = (m + kLaneRows - 1) / kLaneRows * kLaneRows;
    return m >= kLaneRows && 4 * (lanes - m) <= lanes ? PanelKernel::f32_transposed : PanelKernel::avx512;
  }
  return amx_available() ? PanelKernel::amx : PanelKernel::avx512;
}

PackedActivations
pack_activations(const float* x, std::int64_t m, std::int64_t cols, PanelProduct product,
                 std::optional<PanelKernel> kernel) {
  if (!panel_gemm_supported(product))
    throw std::logic_error("pack_activations: this CPU lacks the AVX-512 kernels; check panel_gemm_supported() first");
  PackedActivations out;
  out.product = product;
  out.kernel = kernel.value_or(*panel_gemm_kernel(product, m));
  const bool f32 = product == PanelProduct::f32;
  const bool bf16_kernel =
      out.kernel == PanelKernel::avx512_packed || (out.kernel == PanelKernel::amx && amx_available());
  const bool f32_kernel = out.kernel == PanelKernel::avx512_packed || out.kernel == PanelKernel::f32_transposed;
  if (out.kernel != PanelKernel::avx512 && (f32 ? !f32_kernel : !bf16_kernel))
    throw std::logic_error("pack_activations: that kernel does not serve this product on this CPU");
  out.m = m;
  out.cols = cols;
  if (out.kernel == PanelKernel::f32_transposed) {
    out.row_words = cols;
    out.words.resize(static_cast<std::size_t>((m + kLaneRows - 1) / kLaneRows * kLaneRows * cols));
    pack_transposed(x, m, cols, out.words.data());
    return out;
  }
  const std::int64_t steps = (cols + kStep - 1) / kStep;
  out.row_words = steps * (product == PanelProduct::bf16_rounded ? 16 : 32); // split pairs: 2 words per pair
  // A row pitch that is a multiple of 4 KiB puts the 16 rows of an AMX A tile in one L1 set; 16
  // zero words more spread them (and add 16 zero products per row).
  if (out.kernel == PanelKernel::amx && out.row_words % 1024 == 0)
    out.row_words += 16;
  out.words.resize(static_cast<std::size_t>(m * out.row_words));
  pack_rows(x, m, cols, out);
  return out;
}

void
panel_gemm_rows(const Bf16* w, std::int64_t r0, std::int64_t r1, const PackedActivations& x, float* y,
                std::int64_t ldy) {
  if (x.kernel == PanelKernel::avx512_packed)
    throw std::logic_error("panel_gemm_rows: activations packed for packed panels, with W in rows");
  if (x.kernel == PanelKernel::amx && x.product != PanelProduct::f32) {
    amx_gemm_rows(w, r0, r1, x, y, ldy);
    return;
  }
  gemm_rows(w, r0, r1, x, y, ldy);
}

void
panel_gemm_rows(const float* w, std::int64_t r0, std::int64_t r1, const PackedActivations& x, float* y,
                std::int64_t ldy) {
  if (x.kernel == PanelKernel::f32_transposed) {
    f32_transposed_rows(w, r0, r1, x, y, ldy);
    return;
  }
  gemm_rows(w, r0, r1, x, y, ldy);
}

void
panel_gemm_rows(const PackedPanels& w, std::int64_t r0, std::int64_t r1, const PackedActivations& x, float* y,
                std::int64_t ldy) {
  packed_gemm_rows(w, r0, r1, x, y, ldy);
}

void
pack_weight_panels(const Bf16* w, std::int64_t rows, std::int64_t cols, std::uint32_t* out) {
  if (!panel_gemm_supported(PanelProduct::bf16_rounded))
    throw std::logic_error("pack_weight_panels: this CPU lacks AVX512_BF16; check panel_packing_preferred() first");
  constexpr std::int64_t panel_rows = PackedPanels::kPanelRows;
  const std::int64_t words = PackedPanels::words_for(cols);
  for (std::int64_t n0 = 0; n0 < rows; n0 += panel_rows) {
    const std::int64_t valid = std::min(panel_rows, rows - n0);
    for (std::int64_t p0 = 0; p0 < words; p0 += kBlockWords)
      pack_panel<kTileVectors>(w, cols, n0, valid, p0, std::min(kBlockWords, words - p0), kBlockWords,
                               PanelProduct::bf16_rounded, out + (n0 * words + p0 * panel_rows));
  }
}

} // namespace optkit::runtime
