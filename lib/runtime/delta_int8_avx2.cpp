// AVX2 kernel of delta_int8.hpp, for the x86-64 CPUs without AVX512_VBMI (AMD before Zen 4,
// Intel before Ice Lake): the same packed Δ against the same int8 activations, in 32-byte steps.
//
// Products: VPMADDUBSW multiplies the unsigned activations u = q + 128 by the signed weights w
// and adds neighbouring pairs in int16 (|u·w + u'·w'| ≤ 255·15·2 = 7,650, so a chunk's sum of
// up to four stays under 2¹⁵); VPMADDWD by ones widens each chunk's sum to int32.
//
// 2:4 Δ: a chunk of 128 columns (32 groups of 4, 64 kept codes) in two steps of 32 codes; step s
// takes groups 8s–8s+7 into lane 0 and 16+8s–16+8s+7 into lane 1, byte 2g' and 2g' + 1 of a lane
// holding the two codes of its group g':
// - weights: the chunk's 32 code bytes split into low and high nibbles, VPSHUFB through a 16-entry
//   table to w, and VPUNPCKLBW / VPUNPCKHBW interleave them into step 0's and step 1's order;
// - columns: the 16 position bytes, broadcast to both lanes, VPSHUFB'd one per dword, then
//   shifted so each word holds one group's nibble; (n | n << 6) & 0x0303 puts code 2g's 2 bits in
//   one byte and code 2g + 1's in the next; OR'd with 4·(g' mod 4), each is the column's place in
//   the 16 activations of its group's quarter of 16 columns;
// - gather: VPSHUFB picks within 128-bit lanes, so the activations are laid out once per call with
//   each chunk's quarters in the order the steps read them (register A of step 0: quarters 0 | 4,
//   B: 1 | 5; step 1: 2 | 6 and 3 | 7). Bytes 0–7 of a lane (groups 0–3 of its 8) read A, bytes
//   8–15 read B: two VPSHUFBs and one VPBLENDD (a blend by dwords, with no mask register).
// A dense Δ (64 bytes of codes per 128 columns, column 2j in the low nibble of byte j) multiplies
// its low and high nibbles against the activations laid out even columns then odd ones (as the
// AVX-512 kernel does), with no gather. Up to 8 activation rows share one decode of a chunk, as in
// the AVX-512 kernel (perf_delta_kernel at 8 rows: 0.29–0.30× the base product's time on a quiet
// machine, 0.33–0.41× on a busy one, against 0.44× with 4 rows per pass; a row's int32 sum lives
// only within its scale group).
#include "runtime/delta_int8_x86.hpp"
#include "runtime/x86_features.hpp"

#include <algorithm>
#include <cstddef>
#include <immintrin.h>
#include <vector>

namespace optkit::runtime {

namespace {

#define OPTKIT_AVX2_INT __attribute__((target("avx2,fma")))

constexpr std::int64_t kChunk = kDeltaChunk;
constexpr std::int64_t kStep = 64; // columns per 2:4 step (32 kept codes)

// Bytes 8–15 of each lane (dwords 2, 3, 6, 7) read register B: VPBLENDD's immediate.
constexpr int kHighQwords = 0xcc;

// A chunk's constants: the weight table, the nibble and 2-bit masks, each gather byte's quarter
// base, and int16 ones.
struct ChunkConstants {
  __m256i weights, low_nibbles, pair_bits, quarter_base, ones;
};

OPTKIT_AVX2_INT inline __m256i
load32(const std::int8_t* p) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
}

OPTKIT_AVX2_INT ChunkConstants
chunk_constants(const DeltaCodes& d) {
  alignas(32) std::int8_t table[32], base[32];
  for (int i = 0; i < 32; ++i) {
    table[i] = static_cast<std::int8_t>(signed_weight(d, i % 16));
    const int byte = i % 16; // within its lane: code `byte` of the lane's 8 groups
    base[i] = static_cast<std::int8_t>(4 * ((byte / 2) % 4));
  }
  return {load32(table), _mm256_set1_epi8(0x0f), _mm256_set1_epi16(0x0303), load32(base), _mm256_set1_epi16(1)};
}

// Rows ahead whose packed bytes are fetched into L1 before their turn (perf_delta_kernel at 1 row:
// 0.53 -> 0.40 ms; 2, 4 and 8 rows ahead alike).
constexpr std::int64_t kPrefetchRows = 4;

OPTKIT_AVX2_INT inline void
prefetch(const DeltaCodes& d, const PackedRow& row) {
  for (std::int64_t b = 0; b < d.words * 4; b += 64)
    _mm_prefetch(reinterpret_cast<const char*>(row.codes + b), _MM_HINT_T0);
  if (row.positions)
    for (std::int64_t b = 0; b < d.cols / 8; b += 64)
      _mm_prefetch(reinterpret_cast<const char*>(row.positions + b), _MM_HINT_T0);
}

// Rows [r0, r1) of a Δ against M activation rows: per scale group, `chunk(row, k, acc)` adds chunk
// k's products u·w into acc[j] (int32 lanes); the group's scale applies once, and y[j·ldy + r]
// gets the row's sum, less its 128·Σw (row_offsets[r]), times activation row j's scale. Groups of
// one chunk (128 columns, the recipes' size) take a path where that count is known: acc[] then
// stays in registers (with a run-time count GCC kept it on the stack, two stores per row and
// chunk; 8 rows 0.51 -> 0.36x the base product's time).
template <std::size_t M, typename Chunk>
OPTKIT_AVX2_INT inline void
grouped_rows(const DeltaCodes& d, const float* row_offsets, std::int64_t r0, std::int64_t r1,
             const float* activation_scale, float* y, std::int64_t ldy, const Chunk& chunk) {
  const float factor = signed_weight_factor(d);
  const std::int64_t chunks_per_group = d.group_size / kChunk, groups = d.groups;
  for (std::int64_t r = r0; r < r1; ++r) {
    const PackedRow row = packed_row(d, r);
    if (r + kPrefetchRows < r1)
      prefetch(d, packed_row(d, r + kPrefetchRows));
    const float* scales = d.scales + r * groups;
    __m256 sum[M];
    for (std::size_t j = 0; j < M; ++j)
      sum[j] = _mm256_setzero_ps();
    const auto add_group = [&](std::int64_t g, auto per_group) OPTKIT_AVX2_INT {
      __m256i acc[M];
      for (std::size_t j = 0; j < M; ++j)
        acc[j] = _mm256_setzero_si256();
      for (std::int64_t k = g * per_group; k < (g + 1) * per_group; ++k)
        chunk(row, k, acc);
      const __m256 scale = _mm256_set1_ps(scales[g]);
      for (std::size_t j = 0; j < M; ++j)
        sum[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[j]), scale, sum[j]);
    };
    if (chunks_per_group == 1)
      for (std::int64_t g = 0; g < groups; ++g)
        add_group(g, std::integral_constant<std::int64_t, 1>{});
    else
      for (std::int64_t g = 0; g < groups; ++g)
        add_group(g, chunks_per_group);
    for (std::size_t j = 0; j < M; ++j)
      y[static_cast<std::int64_t>(j) * ldy + r] +=
          (horizontal_sum(sum[j]) + row_offsets[r]) * (activation_scale[j] * factor);
  }
}

// A chunk's two steps: step s takes groups 8s–8s+7 into lane 0 and 16+8s–16+8s+7 into lane 1,
// so one 32-byte load of the codes unpacks into both steps' weights, and one 16-byte load of the
// positions, broadcast to both lanes, shuffles into both steps' gather indices.
struct SparseChunkSteps {
  __m256i w[2], places[2];
};

// Byte j of a lane holds code j of the lane's 8 groups (code 2g in byte 2g, 2g + 1 in 2g + 1).
OPTKIT_AVX2_INT inline void
chunk_weights(const ChunkConstants& c, const std::uint8_t* codes, __m256i (&w)[2]) {
  const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes));
  const __m256i low = _mm256_shuffle_epi8(c.weights, _mm256_and_si256(packed, c.low_nibbles));
  const __m256i high = _mm256_shuffle_epi8(c.weights, _mm256_and_si256(_mm256_srli_epi16(packed, 4), c.low_nibbles));
  w[0] = _mm256_unpacklo_epi8(low, high);
  w[1] = _mm256_unpackhi_epi8(low, high);
}

// Each code's column within the 16 activations of its quarter (see the top of the file).
OPTKIT_AVX2_INT inline __m256i
step_places(const ChunkConstants& c, __m256i positions, __m256i dword_bytes) {
  const __m256i bytes = _mm256_shuffle_epi8(positions, dword_bytes);            // a position byte per dword
  const __m256i nibbles = _mm256_or_si256(bytes, _mm256_slli_epi32(bytes, 12)); // a group's nibble per word
  const __m256i pairs = _mm256_and_si256(_mm256_or_si256(nibbles, _mm256_slli_epi16(nibbles, 6)), c.pair_bits);
  return _mm256_or_si256(pairs, c.quarter_base);
}

OPTKIT_AVX2_INT inline SparseChunkSteps
sparse_chunk_steps(const ChunkConstants& c, const std::uint8_t* codes, const std::uint8_t* positions) {
  // Step 0: position bytes 0–3 (groups 0–7) into lane 0's dwords, 8–11 (groups 16–23) into lane 1's;
  // step 1: bytes 4–7 and 12–15.
  const __m256i first = _mm256_setr_epi8(0, -1, -1, -1, 1, -1, -1, -1, 2, -1, -1, -1, 3, -1, -1, -1, //
                                         8, -1, -1, -1, 9, -1, -1, -1, 10, -1, -1, -1, 11, -1, -1, -1);
  const __m256i second = _mm256_setr_epi8(4, -1, -1, -1, 5, -1, -1, -1, 6, -1, -1, -1, 7, -1, -1, -1, //
                                          12, -1, -1, -1, 13, -1, -1, -1, 14, -1, -1, -1, 15, -1, -1, -1);
  const __m256i broadcast = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(positions)));
  SparseChunkSteps steps;
  chunk_weights(c, codes, steps.w);
  steps.places[0] = step_places(c, broadcast, first);
  steps.places[1] = step_places(c, broadcast, second);
  return steps;
}

// u·w of one step, pairwise in int16: the step's 32 kept activations of a row laid out A, B
// (see the top), each lane's bytes 0–7 from A and 8–15 from B.
OPTKIT_AVX2_INT inline __m256i
sparse_products(__m256i w, __m256i places, const std::uint8_t* laid_out) {
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(laid_out));
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(laid_out + 32));
  const __m256i gathered =
      _mm256_blend_epi32(_mm256_shuffle_epi8(a, places), _mm256_shuffle_epi8(b, places), kHighQwords);
  return _mm256_maddubs_epi16(gathered, w);
}

// A chunk (two steps) of a 2:4 Δ row.
template <std::size_t M> struct SparseChunk {
  const std::uint8_t* const* u; // rows laid out by step_layout
  ChunkConstants c;

  OPTKIT_AVX2_INT void operator()(const PackedRow& row, std::int64_t k, __m256i* acc) const {
    const SparseChunkSteps steps = sparse_chunk_steps(c, row.codes + k * 32, row.positions + k * 16);
    for (std::size_t j = 0; j < M; ++j) {
      const std::uint8_t* chunk = u[j] + k * kChunk;
      const __m256i pairs = _mm256_add_epi16(sparse_products(steps.w[0], steps.places[0], chunk),
                                             sparse_products(steps.w[1], steps.places[1], chunk + kStep));
      acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(pairs, c.ones));
    }
  }
};

// A chunk of a dense 4-bit Δ row against activations laid out even columns then odd ones.
template <std::size_t M> struct DenseChunk {
  const std::uint8_t* const* u;
  ChunkConstants c;

  OPTKIT_AVX2_INT void operator()(const PackedRow& row, std::int64_t k, __m256i* acc) const {
    __m256i even[2], odd[2];
    for (int h = 0; h < 2; ++h) {
      const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row.codes + k * 64 + h * 32));
      even[h] = _mm256_shuffle_epi8(c.weights, _mm256_and_si256(packed, c.low_nibbles));
      odd[h] = _mm256_shuffle_epi8(c.weights, _mm256_and_si256(_mm256_srli_epi16(packed, 4), c.low_nibbles));
    }
    for (std::size_t j = 0; j < M; ++j) {
      const auto* chunk = reinterpret_cast<const __m256i*>(u[j] + k * kChunk);
      __m256i pairs = _mm256_maddubs_epi16(_mm256_loadu_si256(chunk), even[0]);
      pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(_mm256_loadu_si256(chunk + 1), even[1]));
      pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(_mm256_loadu_si256(chunk + 2), odd[0]));
      pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(_mm256_loadu_si256(chunk + 3), odd[1]));
      acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(pairs, c.ones));
    }
  }
};

// Activation rows [i0, i0 + m) of x, each chunk's 16-column quarters in the order its steps'
// registers read them: 0, 4 | 1, 5 (step 0's A | B), 2, 6 | 3, 7 (step 1's).
std::vector<std::uint8_t>
step_layout(const QuantizedActivations& x, std::int64_t i0, std::int64_t m) {
  constexpr std::int64_t kQuarter = 16, kOrder[] = {0, 4, 1, 5, 2, 6, 3, 7};
  std::vector<std::uint8_t> out(static_cast<std::size_t>(m * x.cols));
  for (std::int64_t i = 0; i < m; ++i) {
    const std::uint8_t* from = x.u.data() + (i0 + i) * x.pitch;
    std::uint8_t* to = out.data() + i * x.cols;
    for (std::int64_t c = 0; c < x.cols; c += kChunk)
      for (std::int64_t q = 0; q < 8; ++q)
        std::copy_n(from + c + kOrder[q] * kQuarter, kQuarter, to + c + q * kQuarter);
  }
  return out;
}

template <std::size_t M>
OPTKIT_AVX2_INT void
rows_kernel(const DeltaCodes& d, const float* offsets, std::int64_t r0, std::int64_t r1, const std::uint8_t* const* u,
            const float* scale, float* y, std::int64_t ldy) {
  if (d.sparse)
    grouped_rows<M>(d, offsets, r0, r1, scale, y, ldy, SparseChunk<M>{u, chunk_constants(d)});
  else
    grouped_rows<M>(d, offsets, r0, r1, scale, y, ldy, DenseChunk<M>{u, chunk_constants(d)});
}

} // namespace

bool
delta_int8_avx2_cpu() {
  static const bool has = !cpu_baseline_forced() && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

void
delta_int8_rows_avx2(const DeltaCodes& d, std::span<const float> row_offsets, std::int64_t r0, std::int64_t r1,
                     const QuantizedActivations& x, float* y, std::int64_t ldy) {
  const auto layout = [&](const QuantizedActivations& a, std::int64_t i0, std::int64_t m) {
    return d.sparse ? step_layout(a, i0, m) : even_then_odd(a, i0, m);
  };
  for_each_row_block(x, layout, [&](auto rows, const std::uint8_t* const* u, std::int64_t i0) {
    rows_kernel<decltype(rows)::value>(d, row_offsets.data(), r0, r1, u, x.scale.data() + i0, y + i0 * ldy, ldy);
  });
}

} // namespace optkit::runtime
