// AVX-512F attention and SiLU, chosen by CPUID (x86-64 builds only; see kernels.hpp); the plain
// loops of kernels.cpp on other CPUs and under OPTKIT_CPU_BASELINE=1. The loops call std::exp one
// value at a time; here exp runs sixteen at a time, by the polynomial below.
#include "runtime/kernels.hpp"
#include "runtime/x86_features.hpp"

#include <algorithm>
#include <cmath>

namespace optkit::runtime {

namespace {

#define OPTKIT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

constexpr std::int64_t kLanes = 16;

// e^x, 16 lanes, within 2 ulp of the exact value (1.24 ulp at worst over every 7th float from -103
// to 88.7, measured against exp in double): x = n·ln2 + r with |r| ≤ ln2/2 (ln2 in two parts so
// n·ln2 is exact), e^r by Cephes' degree-7 polynomial, then scaled by 2^n (VSCALEFPS, which
// underflows to 0 and overflows to inf as exp does). Below -104 every float result is 0; NaN stays
// NaN (VMAXPS/VMINPS return their second operand when either is NaN).
OPTKIT_AVX512 inline __m512
exp16(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
  const __m512 n =
      _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

OPTKIT_AVX512 void
silu_multiply_avx512(float* gate, const float* up, std::int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (std::int64_t i = 0; i < n; i += kLanes) {
    const __mmask16 m = first_lanes(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 sigmoid_denominator = _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), g)));
    const __m512 silu = _mm512_div_ps(g, sigmoid_denominator);
    _mm512_mask_storeu_ps(gate + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

OPTKIT_AVX512 inline float
dot_avx512(const float* a, const float* b, std::int64_t n) {
  __m512 sum = _mm512_setzero_ps();
  for (std::int64_t d = 0; d < n; d += kLanes) {
    const __mmask16 m = first_lanes(n - d);
    sum = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + d), _mm512_maskz_loadu_ps(m, b + d), sum);
  }
  return _mm512_reduce_add_ps(sum);
}

// out = Σ_t p[t] · v_t over positions [first, position] for one head: 64 of its dims at a time
// held in registers across every position (accumulating in memory would make each position wait
// for the last one's store).
OPTKIT_AVX512 void
weighted_values_avx512(const float* p, const KvRows& cache, std::int64_t offset, std::int64_t first,
                       std::int64_t position, std::int64_t head_dim, float* out) {
  constexpr int kChunks = 4;
  const std::int64_t bt = cache.block_tokens, stride = cache.stride;
  for (std::int64_t d0 = 0; d0 < head_dim; d0 += kChunks * kLanes) {
    __mmask16 mask[kChunks];
    __m512 sum[kChunks];
    for (int j = 0; j < kChunks; ++j) {
      mask[j] = first_lanes(head_dim - d0 - j * kLanes); // none past head_dim
      sum[j] = _mm512_setzero_ps();
    }
    for (std::int64_t block = first / bt; block <= position / bt; ++block) {
      const auto values = cache.run(cache.value_blocks, block, first, position, offset + d0);
      const float* v = values.row;
      for (std::int64_t t = values.first; t <= values.last; ++t, v += stride) {
        const __m512 weight = _mm512_set1_ps(p[t]);
        for (int j = 0; j < kChunks; ++j)
          sum[j] = _mm512_fmadd_ps(weight, _mm512_maskz_loadu_ps(mask[j], v + j * kLanes), sum[j]);
      }
    }
    for (int j = 0; j < kChunks; ++j)
      _mm512_mask_storeu_ps(out + d0 + j * kLanes, mask[j], sum[j]);
  }
}

// scores[t] = e^(scores[t] - max) / Σ for t in [first, end).
OPTKIT_AVX512 void
softmax_avx512(float* scores, std::int64_t first, std::int64_t end, float max) {
  const __m512 shift = _mm512_set1_ps(max);
  __m512 sum = _mm512_setzero_ps();
  for (std::int64_t t = first; t < end; t += kLanes) {
    const __mmask16 m = first_lanes(end - t);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, scores + t), shift));
    sum = _mm512_mask_add_ps(sum, m, sum, e);
    _mm512_mask_storeu_ps(scores + t, m, e);
  }
  const __m512 total = _mm512_set1_ps(_mm512_reduce_add_ps(sum));
  for (std::int64_t t = first; t < end; t += kLanes) {
    const __mmask16 m = first_lanes(end - t);
    _mm512_mask_storeu_ps(scores + t, m, _mm512_div_ps(_mm512_maskz_loadu_ps(m, scores + t), total));
  }
}

// attend_loops' passes sixteen lanes at a time: scores block by block (each key row read once for
// the group's heads), then per head its softmax and its weighted sum of value rows.
OPTKIT_AVX512 void
attend_avx512(const float* queries, std::int64_t heads, const KvRows& cache, std::int64_t offset, std::int64_t first,
              std::int64_t position, std::int64_t head_dim, AttentionScores scoring, float* scratch, float* out) {
  const std::int64_t bt = cache.block_tokens, stride = cache.stride, span = position + 1;
  float* const max_score = scratch + heads * span;
  std::fill(max_score, max_score + heads, -INFINITY);
  for (std::int64_t block = first / bt; block <= position / bt; ++block) {
    const auto keys = cache.run(cache.key_blocks, block, first, position, offset);
    const float* k = keys.row;
    for (std::int64_t t = keys.first; t <= keys.last; ++t, k += stride)
      for (std::int64_t h = 0; h < heads; ++h) {
        float score = dot_avx512(queries + h * head_dim, k, head_dim) * scoring.scale;
        if (scoring.softcap > 0)
          score = scoring.softcap * std::tanh(score / scoring.softcap);
        scratch[h * span + t] = score;
        max_score[h] = std::max(max_score[h], score);
      }
  }
  for (std::int64_t h = 0; h < heads; ++h) {
    softmax_avx512(scratch + h * span, first, span, max_score[h]);
    weighted_values_avx512(scratch + h * span, cache, offset, first, position, head_dim, out + h * head_dim);
  }
}

} // namespace

void
silu_multiply(float* gate, const float* up, std::int64_t n) {
  if (cpu_has_avx512())
    silu_multiply_avx512(gate, up, n);
  else
    silu_multiply_loops(gate, up, n);
}

void
attend(const float* queries, std::int64_t heads, const KvRows& cache, std::int64_t offset, std::int64_t first,
       std::int64_t position, std::int64_t head_dim, AttentionScores scores, float* scratch, float* out) {
  if (cpu_has_avx512())
    attend_avx512(queries, heads, cache, offset, first, position, head_dim, scores, scratch, out);
  else
    attend_loops(queries, heads, cache, offset, first, position, head_dim, scores, scratch, out);
}

const char*
attention_kernel() {
  return cpu_has_avx512() ? "avx512" : "portable";
}

} // namespace optkit::runtime
