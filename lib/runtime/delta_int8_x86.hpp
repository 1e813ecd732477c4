// What the x86-64 integer Δ kernels (delta_int8_x86.cpp: AVX512_VNNI + AVX512_VBMI; and
// delta_int8_avx2.cpp: AVX2) share, and the entry points delta_int8_x86.cpp chooses between.
// Both take exactly the codes delta_int8_supported() accepts and compute the same sums in int32:
// u·w with u = q + 128 the unsigned activation and w the code's signed weight, the row's 128·Σw
// taken off after the groups' scales (delta_int8_row_offsets).
#pragma once

#include "runtime/delta_decode.hpp"
#include "runtime/int8_gemm.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace optkit::runtime {

// The signed weight of code c: 2·c − 15 on a mid-rise grid (the value is w/2), c − 8 without one.
inline int
signed_weight(const DeltaCodes& d, int code) {
  return d.offset != 0.0f ? 2 * code - 15 : code - 8;
}

// What the mid-rise grid's w/2 leaves to multiply each row's sum by.
inline float
signed_weight_factor(const DeltaCodes& d) {
  return d.offset != 0.0f ? 0.5f : 1.0f;
}

// Activation rows [i0, i0 + m) of x, each chunk of 128 columns laid out as its 64 even columns
// then its 64 odd ones: what a dense Δ's low and high nibbles multiply, in the same lanes.
std::vector<std::uint8_t> even_then_odd(const QuantizedActivations& x, std::int64_t i0, std::int64_t m);

// Whether this CPU runs each kernel (neither when OPTKIT_CPU_BASELINE=1).
bool delta_int8_avx512_cpu();
bool delta_int8_avx2_cpu();

// delta_int8_rows on each kernel; the caller has checked its CPU and delta_int8_supported().
void delta_int8_rows_avx512(const DeltaCodes& codes, std::span<const float> row_offsets, std::int64_t r0,
                            std::int64_t r1, const QuantizedActivations& x, float* y, std::int64_t ldy);
void delta_int8_rows_avx2(const DeltaCodes& codes, std::span<const float> row_offsets, std::int64_t r0, std::int64_t r1,
                          const QuantizedActivations& x, float* y, std::int64_t ldy);

} // namespace optkit::runtime
