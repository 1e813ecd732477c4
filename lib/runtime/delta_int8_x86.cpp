// AVX512_VNNI + AVX512_VBMI kernel of delta_int8.hpp, and the choice between it and the AVX2 one
// (delta_int8_avx2.cpp) by CPUID at run time (x86-64 builds).
//
// 128 columns of a 2:4 4-bit Δ row are 32 bytes of codes (code 2g of group g in the low nibble of
// byte g, code 2g + 1 in the high nibble) and 16 bytes of kept positions (group g's nibble: the
// column of code 2g in its low 2 bits, of code 2g + 1 in the high 2). In one 64-byte vector, lane
// g < 32 takes code 2g and lane 32 + g code 2g + 1; the same lanes of a second vector hold the
// column each one multiplies, 4g + position, and VPERMI2B gathers those activations from the
// chunk's 128 (two 64-byte registers). VPDPBUSD then adds u·w over the lanes, with u = q + 128
// the unsigned activation and w the signed code: 2·code − 15 on a mid-rise grid (offset ½, the
// value is w/2), code − 8 without one. The 128·Σw this adds is taken off once per row, after the
// groups' scales: a constant per row made at load (delta_int8_row_offsets).
// Decoding costs few instructions per chunk: the codes' 32 bytes are broadcast to both halves
// and VPMULTISHIFTQB brings each lane's nibble to its low bits, where one VPERMB through a
// 64-entry table (indexed by the low 6 bits, so the neighbours' bits left above the nibble do
// not matter) gives w. The positions' 16 bytes are broadcast to every 128-bit lane, where VPSHUFB
// (cheaper than a cross-lane VPERMB) hands each lane its group's byte and VPMULTISHIFTQB its 2
// bits; a lane's column is those bits OR 4g in one VPTERNLOGD. Up to 8 activation rows share one
// decode of a chunk (8 accumulators and 8 sums fit the 32 vector registers).
//
// A dense 4-bit Δ (the embeddings' and LM head's, rounded rather than pruned) has 64 bytes of
// codes per 128 columns, column 2j in the low nibble of byte j and column 2j + 1 in its high
// nibble; the activations are laid out once per call as even columns then odd ones per chunk, so
// each nibble half meets its 64 activations in the same lanes, with no gather.
#include "runtime/delta_int8_x86.hpp"
#include "runtime/delta_int8.hpp"
#include "runtime/x86_features.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cstddef>
#include <immintrin.h>
#include <string>
#include <vector>

namespace optkit::runtime {

namespace {

#define OPTKIT_VBMI_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")))

constexpr std::int64_t kChunk = kDeltaChunk;
constexpr int kLowBitsOrHigh = 0xea; // VPTERNLOGD: (a AND b) OR c

// The lane constants: the bit offset (within the lane's qword of the broadcast codes) of its
// nibble, which index byte its position nibble sits in, the bit offset of its 2-bit position, and
// its group's first column.
struct Lanes {
  __m512i code_shift, nibble_byte, position_shift, group_base;
};

OPTKIT_VBMI_VNNI Lanes
lanes() {
  alignas(64) std::uint8_t code[64], byte[64], shift[64], base[64];
  for (int lane = 0; lane < 64; ++lane) {
    const int group = lane % 32;
    code[lane] = static_cast<std::uint8_t>(8 * (group % 8) + (lane >= 32 ? 4 : 0));
    byte[lane] = static_cast<std::uint8_t>(group / 2);
    shift[lane] = static_cast<std::uint8_t>(8 * (lane % 8) + 4 * (group % 2) + (lane >= 32 ? 2 : 0));
    base[lane] = static_cast<std::uint8_t>(4 * group);
  }
  return {_mm512_load_si512(code), _mm512_load_si512(byte), _mm512_load_si512(shift), _mm512_load_si512(base)};
}

// Each code's signed weight, repeated for every value of the two index bits above it (see the top
// of the file).
OPTKIT_VBMI_VNNI inline __m512i
weight_table(const DeltaCodes& d) {
  alignas(64) std::int8_t table[64];
  for (int i = 0; i < 64; ++i)
    table[i] = static_cast<std::int8_t>(signed_weight(d, i % 16));
  return _mm512_load_si512(table);
}

// Rows [r0, r1) of a Δ against M activation rows: per scale group, `chunk(row, k, acc)` adds chunk
// k's products u·w into acc[j] (int32); the group's scale applies once, and y[j·ldy + r] gets the
// row's sum, less its 128·Σw (row_offsets[r]), times activation row j's scale.
template <std::size_t M, typename Chunk>
OPTKIT_VBMI_VNNI inline void
grouped_rows(const DeltaCodes& d, const float* row_offsets, std::int64_t r0, std::int64_t r1,
             const float* activation_scale, float* y, std::int64_t ldy, const Chunk& chunk) {
  const float factor = signed_weight_factor(d);
  const std::int64_t chunks_per_group = d.group_size / kChunk, groups = d.groups;
  for (std::int64_t r = r0; r < r1; ++r) {
    const PackedRow row = packed_row(d, r);
    const float* scales = d.scales + r * groups;
    __m512 sum[M];
    for (std::size_t j = 0; j < M; ++j)
      sum[j] = _mm512_setzero_ps();
    for (std::int64_t g = 0; g < groups; ++g) {
      __m512i acc[M];
      for (std::size_t j = 0; j < M; ++j)
        acc[j] = _mm512_setzero_si512();
      for (std::int64_t k = g * chunks_per_group; k < (g + 1) * chunks_per_group; ++k)
        chunk(row, k, acc);
      const __m512 scale = _mm512_set1_ps(scales[g]);
      for (std::size_t j = 0; j < M; ++j)
        sum[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[j]), scale, sum[j]);
    }
    for (std::size_t j = 0; j < M; ++j)
      y[static_cast<std::int64_t>(j) * ldy + r] +=
          (_mm512_reduce_add_ps(sum[j]) + row_offsets[r]) * (activation_scale[j] * factor);
  }
}

// A chunk of a 2:4 Δ row: the 64 kept codes, and the activations their positions name gathered.
template <std::size_t M> struct SparseChunk {
  const DeltaCodes& d;
  const std::uint8_t* const* u;
  Lanes l = lanes();
  __m512i weights = weight_table(d);

  OPTKIT_VBMI_VNNI void operator()(const PackedRow& row, std::int64_t k, __m512i* acc) const {
    const __m512i three = _mm512_set1_epi8(3);
    const __m512i packed =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row.codes + k * 32)));
    const __m512i code = _mm512_multishift_epi64_epi8(l.code_shift, packed);
    const __m512i w = _mm512_permutexvar_epi8(code, weights);
    const __m128i nibbles = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row.positions + k * 16));
    const __m512i spread = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(nibbles), l.nibble_byte);
    const __m512i column = _mm512_ternarylogic_epi32(_mm512_multishift_epi64_epi8(l.position_shift, spread), three,
                                                     l.group_base, kLowBitsOrHigh);
    for (std::size_t j = 0; j < M; ++j) {
      const std::uint8_t* chunk = u[j] + k * kChunk;
      const __m512i gathered =
          _mm512_permutex2var_epi8(_mm512_loadu_si512(chunk), column, _mm512_loadu_si512(chunk + 64));
      acc[j] = _mm512_dpbusd_epi32(acc[j], gathered, w);
    }
  }
};

// A chunk of a dense 4-bit Δ row against activations laid out even columns then odd ones.
template <std::size_t M> struct DenseChunk {
  const DeltaCodes& d;
  const std::uint8_t* const* u;
  __m512i weights = weight_table(d);

  OPTKIT_VBMI_VNNI void operator()(const PackedRow& row, std::int64_t k, __m512i* acc) const {
    const __m512i packed = _mm512_loadu_si512(row.codes + k * 64), high = _mm512_srli_epi16(packed, 4);
    const __m512i even = _mm512_permutexvar_epi8(packed, weights);
    const __m512i odd = _mm512_permutexvar_epi8(high, weights);
    for (std::size_t j = 0; j < M; ++j) {
      const std::uint8_t* chunk = u[j] + k * kChunk;
      acc[j] = _mm512_dpbusd_epi32(acc[j], _mm512_loadu_si512(chunk), even);
      acc[j] = _mm512_dpbusd_epi32(acc[j], _mm512_loadu_si512(chunk + 64), odd);
    }
  }
};

// Rows [r0, r1) of a Δ against M activation rows `u`: a 2:4 Δ's as they are, a dense Δ's laid out
// per chunk as its 64 even columns then its 64 odd ones; `scale` the rows' activation scales.
template <std::size_t M>
OPTKIT_VBMI_VNNI void
rows_kernel(const DeltaCodes& d, const float* offsets, std::int64_t r0, std::int64_t r1, const std::uint8_t* const* u,
            const float* scale, float* y, std::int64_t ldy) {
  if (d.sparse)
    grouped_rows<M>(d, offsets, r0, r1, scale, y, ldy, SparseChunk<M>{d, u});
  else
    grouped_rows<M>(d, offsets, r0, r1, scale, y, ldy, DenseChunk<M>{d, u});
}

} // namespace

std::vector<std::uint8_t>
even_then_odd(const QuantizedActivations& x, std::int64_t i0, std::int64_t m) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(m * x.cols));
  for (std::int64_t i = 0; i < m; ++i) {
    const std::uint8_t* from = x.u.data() + (i0 + i) * x.pitch;
    std::uint8_t* to = out.data() + i * x.cols;
    for (std::int64_t c = 0; c < x.cols; ++c)
      to[(c / kChunk) * kChunk + (c % 2) * 64 + (c % kChunk) / 2] = from[c];
  }
  return out;
}

bool
delta_int8_avx512_cpu() {
  static const bool has =
      cpu_has_avx512() && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
  return has;
}

void
delta_int8_rows_avx512(const DeltaCodes& d, std::span<const float> row_offsets, std::int64_t r0, std::int64_t r1,
                       const QuantizedActivations& x, float* y, std::int64_t ldy) {
  const auto layout = [&](const QuantizedActivations& a, std::int64_t i0, std::int64_t m) {
    return d.sparse ? std::vector<std::uint8_t>() : even_then_odd(a, i0, m);
  };
  for_each_row_block(x, layout, [&](auto rows, const std::uint8_t* const* u, std::int64_t i0) {
    rows_kernel<decltype(rows)::value>(d, row_offsets.data(), r0, r1, u, x.scale.data() + i0, y + i0 * ldy, ldy);
  });
}

std::vector<DeltaInt8Kernel>
delta_int8_kernels() {
  std::vector<DeltaInt8Kernel> kernels;
  if (delta_int8_avx512_cpu())
    kernels.push_back(DeltaInt8Kernel::avx512_vbmi);
  if (delta_int8_avx2_cpu())
    kernels.push_back(DeltaInt8Kernel::avx2);
  return kernels;
}

bool
delta_int8_cpu() {
  return delta_int8_avx512_cpu() || delta_int8_avx2_cpu();
}

bool
delta_int8_supported(const DeltaCodes& d, bool distinct_pairs) {
  const bool layout = d.sparse ? distinct_pairs && d.indices != nullptr && d.words * 16 == d.cols
                               : d.indices == nullptr && d.words * 8 == d.cols;
  return delta_int8_cpu() && layout && d.bits == 4 && d.cols % kChunk == 0 && d.cols > 0 && d.group_size > 0 &&
         d.group_size % kChunk == 0 && d.cols % d.group_size == 0 && d.groups == d.cols / d.group_size &&
         (d.offset == 0.0f || d.offset == 0.5f);
}

bool
delta_pairs_distinct(const DeltaCodes& d, std::int64_t rows) {
  if (!d.sparse || d.indices == nullptr)
    return true;
  const std::int64_t bytes = rows * (d.cols / 8);
  for (std::int64_t i = 0; i < bytes; ++i)
    for (const int nibble : {d.indices[i] & 0xf, d.indices[i] >> 4})
      if ((nibble & 3) == (nibble >> 2))
        return false;
  return true;
}

std::vector<float>
delta_int8_row_offsets(const DeltaCodes& d, std::int64_t rows) {
  const std::int64_t codes_per_group = d.sparse ? d.group_size / 2 : d.group_size;
  std::vector<float> offsets(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto* codes = reinterpret_cast<const std::uint8_t*>(d.values + r * d.words);
    double row = 0;
    for (std::int64_t g = 0; g < d.groups; ++g) {
      std::int32_t sum = 0;
      for (std::int64_t i = g * codes_per_group; i < (g + 1) * codes_per_group; ++i)
        sum += signed_weight(d, (codes[i / 2] >> (4 * (i % 2))) & 0xf);
      row += -128.0 * sum * static_cast<double>(d.scales[r * d.groups + g]);
    }
    offsets[static_cast<std::size_t>(r)] = static_cast<float>(row);
  }
  return offsets;
}

void
delta_int8_rows(DeltaInt8Kernel kernel, const DeltaCodes& d, std::span<const float> row_offsets, std::int64_t r0,
                std::int64_t r1, const QuantizedActivations& x, float* y, std::int64_t ldy) {
  if (x.cols != d.cols)
    throw RuntimeFailure("integer Δ product: activations of another width than the Δ");
  if (static_cast<std::int64_t>(row_offsets.size()) < r1)
    throw RuntimeFailure("integer Δ product: fewer row offsets than the Δ's rows");
  const bool runs = kernel == DeltaInt8Kernel::avx512_vbmi ? delta_int8_avx512_cpu() : delta_int8_avx2_cpu();
  if (!runs)
    throw RuntimeFailure(std::string("integer Δ product: this CPU lacks the ") + to_string(kernel) + " kernel");
  if (kernel == DeltaInt8Kernel::avx512_vbmi)
    delta_int8_rows_avx512(d, row_offsets, r0, r1, x, y, ldy);
  else
    delta_int8_rows_avx2(d, row_offsets, r0, r1, x, y, ldy);
}

void
delta_int8_rows(const DeltaCodes& d, std::span<const float> row_offsets, std::int64_t r0, std::int64_t r1,
                const QuantizedActivations& x, float* y, std::int64_t ldy) {
  const auto kernel = delta_int8_avx512_cpu() ? DeltaInt8Kernel::avx512_vbmi : DeltaInt8Kernel::avx2;
  delta_int8_rows(kernel, d, row_offsets, r0, r1, x, y, ldy);
}

} // namespace optkit::runtime
