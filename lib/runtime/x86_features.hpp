// What the x86-64 kernel files (dot_rows_x86, panel_gemm_x86, int8_gemm_x86, delta_int8_*) share:
// the intrinsics header, a horizontal sum, and the CPU checks that choose their kernels at run
// time, all honouring OPTKIT_CPU_BASELINE=1 (the x86 kernels off: the tests run the portable
// paths on any CPU).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <immintrin.h>
#include <string_view>

// GCC 12's AVX-512 headers build some results from self-initialized "undefined" vectors, which
// -Wuninitialized reports once they are inlined into the kernels.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace optkit::runtime {

inline bool
cpu_baseline_forced() {
  const char* baseline = std::getenv("OPTKIT_CPU_BASELINE");
  return baseline != nullptr && std::string_view(baseline) == "1";
}

// The mask of a 16-lane step's first n lanes (none for n ≤ 0, all for n ≥ 16): the lanes of a
// vector that lie before the end of a row or a panel.
inline __mmask16
first_lanes(std::int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xffff : n <= 0 ? 0 : (1u << n) - 1);
}

// AVX-512 F, BW and VL (what every AVX-512 kernel here needs), unless the baseline is forced.
inline bool
cpu_has_avx512() {
  static const bool has = !cpu_baseline_forced() && __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return has;
}

// The sum of a vector's 8 floats (the AVX2 kernels' row totals).
__attribute__((target("avx"))) inline float
horizontal_sum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

} // namespace optkit::runtime
