// AVX2 decode of compressed Δ rows (see delta_decode.hpp), chosen by CPUID: eight codes unpacked
// and scaled per instruction sequence, and a 2:4 row's kept values placed into their columns by
// one permute per two groups. Shapes it does not take (columns or scale groups that are not a
// multiple of one vector's columns), and CPUs without AVX2 or OPTKIT_CPU_BASELINE=1, take the
// plain loops — with the same operations in the same order, so the two agree bit for bit.
#include "runtime/delta_decode.hpp"
#include "runtime/x86_features.hpp"

#include <array>
#include <immintrin.h>

namespace optkit::runtime {

namespace {

#define OPTKIT_AVX2 __attribute__((target("avx2")))

// Codes k … k+7 of a row (k a multiple of 8) as int32 lanes.
template <int Bits>
OPTKIT_AVX2 inline __m256i
codes8(const std::int32_t* words, std::int64_t k) {
  if constexpr (Bits == 8) { // code c is byte c of the row (x86 is little-endian)
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(words) + k;
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes)));
  } else {
    constexpr std::int64_t kPerWord = 32 / Bits;
    const __m256i shifts =
        _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(k % kPerWord) * Bits),
                         _mm256_setr_epi32(0, Bits, 2 * Bits, 3 * Bits, 4 * Bits, 5 * Bits, 6 * Bits, 7 * Bits));
    const __m256i word = _mm256_set1_epi32(words[k / kPerWord]);
    return _mm256_and_si256(_mm256_srlv_epi32(word, shifts), _mm256_set1_epi32((1 << Bits) - 1));
  }
}

// (code − 2^(Bits−1) + offset) · scale for codes k … k+7, as the loops compute each.
template <int Bits>
OPTKIT_AVX2 inline __m256
values8(const std::int32_t* words, std::int64_t k, __m256 offset, float scale) {
  const __m256i centred = _mm256_sub_epi32(codes8<Bits>(words, k), _mm256_set1_epi32(1 << (Bits - 1)));
  return _mm256_mul_ps(_mm256_add_ps(_mm256_cvtepi32_ps(centred), offset), _mm256_set1_ps(scale));
}

// Where the four values of two 2:4 groups (one byte of kept positions, two nibbles) go in their
// eight columns: the value lane each column takes, and whether it takes one (else zero). A column
// both positions of a nibble name takes the second value.
struct alignas(32) Placement {
  std::int32_t lane[8];
  std::int32_t keep[8];
};

const std::array<Placement, 256> kPlacements = [] {
  std::array<Placement, 256> table{};
  for (unsigned byte = 0; byte < 256; ++byte)
    for (unsigned column = 0; column < 8; ++column) {
      const unsigned group = column / 4, position = column % 4, nibble = (byte >> (4 * group)) & 0xfu;
      Placement& p = table[byte];
      const bool second = position == nibble >> 2, first = position == (nibble & 3u);
      p.lane[column] = static_cast<std::int32_t>(2 * group + (second ? 1 : 0));
      p.keep[column] = second || first ? -1 : 0;
    }
  return table;
}();

OPTKIT_AVX2 inline void
place(__m256 values, std::uint8_t byte, float* out) {
  const Placement& p = kPlacements[byte];
  const __m256 placed = _mm256_permutevar8x32_ps(values, _mm256_load_si256(reinterpret_cast<const __m256i*>(p.lane)));
  _mm256_storeu_ps(out, _mm256_and_ps(placed, _mm256_load_ps(reinterpret_cast<const float*>(p.keep))));
}

// One 2:4 row, 16 columns (four groups, eight codes) per step; group_size a multiple of 16.
template <int Bits>
OPTKIT_AVX2 void
decode_sparse_row(const DeltaCodes& codes, const std::int32_t* words, const std::uint8_t* indices, const float* scales,
                  float* out) {
  const __m256 offset = _mm256_set1_ps(codes.offset);
  for (std::int64_t b = 0; b < codes.cols / 16; ++b) {
    const __m256 values = values8<Bits>(words, b * 8, offset, scales[b * 16 / codes.group_size]);
    place(values, indices[2 * b], out + b * 16);
    place(_mm256_permute2f128_ps(values, values, 0x11), indices[2 * b + 1], out + b * 16 + 8);
  }
}

// One dense row, 8 columns per step; group_size a multiple of 8.
template <int Bits>
OPTKIT_AVX2 void
decode_dense_row(const DeltaCodes& codes, const std::int32_t* words, const float* scales, float* out) {
  const __m256 offset = _mm256_set1_ps(codes.offset);
  for (std::int64_t c = 0; c < codes.cols; c += 8)
    _mm256_storeu_ps(out + c, values8<Bits>(words, c, offset, scales[c / codes.group_size]));
}

template <int Bits>
OPTKIT_AVX2 void
decode_rows_avx2(const DeltaCodes& codes, std::int64_t r0, std::int64_t n, float* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t r = r0 + i;
    const std::int32_t* words = codes.values + r * codes.words;
    const float* scales = codes.scales + r * codes.groups;
    if (codes.sparse)
      decode_sparse_row<Bits>(codes, words, codes.indices + r * codes.cols / 8, scales, out + i * codes.cols);
    else
      decode_dense_row<Bits>(codes, words, scales, out + i * codes.cols);
  }
}

bool
cpu_has_avx2() {
  static const bool has = !cpu_baseline_forced() && __builtin_cpu_supports("avx2");
  return has;
}

} // namespace

void
decode_delta_rows(const DeltaCodes& codes, std::int64_t r0, std::int64_t n, float* out) {
  const std::int64_t run = codes.sparse ? 16 : 8; // the columns one vector of eight codes fills
  if (!cpu_has_avx2() || codes.cols % run != 0 || codes.group_size % run != 0) {
    decode_delta_rows_loops(codes, r0, n, out);
    return;
  }
  switch (codes.bits) {
  case 2:
    decode_rows_avx2<2>(codes, r0, n, out);
    return;
  case 4:
    decode_rows_avx2<4>(codes, r0, n, out);
    return;
  default: // 8: the artifact admits no other width
    decode_rows_avx2<8>(codes, r0, n, out);
  }
}

} // namespace optkit::runtime
