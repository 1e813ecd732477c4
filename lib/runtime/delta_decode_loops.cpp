// The plain decode loops of compressed Δ rows (see delta_decode.hpp): one pass per row that unpacks
// and scales, with each 2:4 group's four columns written by one SSE2 store where the target has it.
#include "runtime/delta_decode.hpp"

#include <algorithm>
#include <array>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace optkit::runtime {

namespace {

// One 2:4 row decoded and scaled in one pass, `Bits` known at compile time: per group of four
// columns a nibble of kept positions and two values from one packed word.
template <int Bits>
void
decode_sparse_row(const std::int32_t* words, const std::uint8_t* indices, std::int64_t cols, float offset,
                  const float* scales, std::int64_t group_size, float* out) {
  constexpr std::int64_t kPerWord = 32 / Bits;
  constexpr std::uint32_t kMask = (1u << Bits) - 1u;
  constexpr int kBias = 1 << (Bits - 1);
  const bool aligned = group_size % 4 == 0; // a group of four never straddles two scales
#if defined(__SSE2__)
  if (aligned) {
    // Each group's four columns in one store: the kept two placed by masks looked up by the
    // group's nibble (the second wins should both name one column, as the scalar path's order).
    struct alignas(16) Mask {
      std::uint32_t lanes[4];
    };
    static const auto masks = [] {
      std::array<std::array<Mask, 2>, 16> m{};
      for (unsigned nibble = 0; nibble < 16; ++nibble) {
        m[nibble][0].lanes[nibble & 3u] = 0xffffffffu;
        m[nibble][1].lanes[nibble >> 2] = 0xffffffffu;
      }
      return m;
    }();
    for (std::int64_t g = 0; g < cols / 4; ++g) {
      const unsigned nibble = (static_cast<unsigned>(indices[g >> 1]) >> ((g & 1) * 4)) & 0xfu;
      const std::int64_t k = g * 2;
      const auto word = static_cast<std::uint32_t>(words[k / kPerWord]);
      const auto shift = static_cast<unsigned>(Bits * (k % kPerWord));
      const float s = scales[g * 4 / group_size];
      const float v0 = (static_cast<float>(static_cast<int>((word >> shift) & kMask) - kBias) + offset) * s;
      const float v1 = (static_cast<float>(static_cast<int>((word >> (shift + Bits)) & kMask) - kBias) + offset) * s;
      const __m128 m0 = _mm_load_ps(reinterpret_cast<const float*>(masks[nibble][0].lanes));
      const __m128 m1 = _mm_load_ps(reinterpret_cast<const float*>(masks[nibble][1].lanes));
      const __m128 first = _mm_and_ps(m0, _mm_set1_ps(v0));
      _mm_storeu_ps(out + g * 4, _mm_or_ps(_mm_and_ps(m1, _mm_set1_ps(v1)), _mm_andnot_ps(m1, first)));
    }
    return;
  }
#endif
  std::fill(out, out + cols, 0.0f);
  for (std::int64_t g = 0; g < cols / 4; ++g) {
    const unsigned nibble = (static_cast<unsigned>(indices[g >> 1]) >> ((g & 1) * 4)) & 0xfu;
    const std::int64_t k = g * 2; // the pair shares a word (kPerWord is even)
    const auto word = static_cast<std::uint32_t>(words[k / kPerWord]);
    const auto shift = static_cast<unsigned>(Bits * (k % kPerWord));
    const std::int64_t c0 = g * 4 + (nibble & 3u), c1 = g * 4 + (nibble >> 2);
    const float s0 = scales[(aligned ? g * 4 : c0) / group_size], s1 = aligned ? s0 : scales[c1 / group_size];
    out[c0] = (static_cast<float>(static_cast<int>((word >> shift) & kMask) - kBias) + offset) * s0;
    out[c1] = (static_cast<float>(static_cast<int>((word >> (shift + Bits)) & kMask) - kBias) + offset) * s1;
  }
}

// One dense row decoded and scaled, `Bits` known at compile time and one scale per run of
// group_size columns (no per-element division): the embedding and LM head Δs take this path.
template <int Bits>
void
decode_dense_row(const std::int32_t* words, std::int64_t cols, float offset, const float* scales,
                 std::int64_t group_size, float* out) {
  constexpr std::int64_t kPerWord = 32 / Bits;
  constexpr std::uint32_t kMask = (1u << Bits) - 1u;
  constexpr int kBias = 1 << (Bits - 1);
  for (std::int64_t c0 = 0; c0 < cols; c0 += group_size) {
    const float s = scales[c0 / group_size];
    const std::int64_t end = std::min(cols, c0 + group_size);
    for (std::int64_t c = c0; c < end; ++c) {
      const auto word = static_cast<std::uint32_t>(words[c / kPerWord]);
      const auto shift = static_cast<unsigned>(Bits * (c % kPerWord));
      out[c] = (static_cast<float>(static_cast<int>((word >> shift) & kMask) - kBias) + offset) * s;
    }
  }
}

template <int Bits>
void
decode_row(const DeltaCodes& codes, std::int64_t r, float* out) {
  const std::int32_t* words = codes.values + r * codes.words;
  const float* scales = codes.scales + r * codes.groups;
  if (codes.sparse)
    decode_sparse_row<Bits>(words, codes.indices + r * codes.cols / 8, codes.cols, codes.offset, scales,
                            codes.group_size, out);
  else
    decode_dense_row<Bits>(words, codes.cols, codes.offset, scales, codes.group_size, out);
}

} // namespace

void
decode_delta_rows_loops(const DeltaCodes& codes, std::int64_t r0, std::int64_t n, float* out) {
  const auto decode = codes.bits == 2 ? decode_row<2> : codes.bits == 4 ? decode_row<4> : decode_row<8>;
  for (std::int64_t i = 0; i < n; ++i) // 8 bits unless 2 or 4: the artifact admits no other width
    decode(codes, r0 + i, out + i * codes.cols);
}

} // namespace optkit::runtime
