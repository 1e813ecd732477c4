// What the x86-64 integer Δ kernels (delta_int8_x86.cpp: AVX512_VNNI + AVX512_VBMI; and
// delta_int8_avx2.cpp: AVX2) share, and the entry points delta_int8_x86.cpp chooses between.
// Both take exactly the codes delta_int8_supported() accepts and compute the same sums in int32:
// u·w with u = q + 128 the unsigned activation and w the code's signed weight, the row's 128·Σw
// taken off after the groups' scales (delta_int8_row_offsets).
#pragma once

#include "runtime/delta_decode.hpp"
#include "runtime/int8_gemm.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

namespace optkit::runtime {

constexpr std::int64_t kDeltaChunk = 128; // columns per chunk (a scale group is whole chunks)
constexpr std::size_t kDeltaMaxRows = 8;  // activation rows one pass over a Δ row serves

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

// One Δ row's packed bytes: its codes, and its 2:4 kept positions (null when dense).
struct PackedRow {
  const std::uint8_t* codes;
  const std::uint8_t* positions;
};

inline PackedRow
packed_row(const DeltaCodes& d, std::int64_t r) {
  return {reinterpret_cast<const std::uint8_t*>(d.values + r * d.words),
          d.indices ? d.indices + r * (d.cols / 8) : nullptr};
}

// Runs kernel(std::integral_constant<std::size_t, m>{}) for a run-time m in [1, M]: the kernels
// keep one accumulator per activation row in registers, so their row count is a template argument.
template <std::size_t M = kDeltaMaxRows, typename Kernel>
void
with_row_count(std::size_t m, const Kernel& kernel) {
  if constexpr (M > 0) {
    if (m == M)
      kernel(std::integral_constant<std::size_t, M>{});
    else
      with_row_count<M - 1>(m, kernel);
  }
}

// For each block of up to kDeltaMaxRows activation rows of x, from row i0: lays them out with
// layout(x, i0, m) (nothing: x's own rows) and runs kernel(rows, u, i0), `rows` an
// std::integral_constant holding the block's row count and u[j] its row j.
template <typename Layout, typename Kernel>
void
for_each_row_block(const QuantizedActivations& x, const Layout& layout, const Kernel& kernel) {
  constexpr auto kRows = static_cast<std::int64_t>(kDeltaMaxRows);
  for (std::int64_t i0 = 0; i0 < x.m; i0 += kRows) {
    const auto m = std::min(kRows, x.m - i0);
    const std::vector<std::uint8_t> laid_out = layout(x, i0, m);
    const std::uint8_t* u[kDeltaMaxRows];
    for (std::int64_t j = 0; j < m; ++j)
      u[j] = laid_out.empty() ? x.u.data() + (i0 + j) * x.pitch : laid_out.data() + j * x.cols;
    with_row_count(static_cast<std::size_t>(m), [&](auto rows) { kernel(rows, u, i0); });
  }
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
