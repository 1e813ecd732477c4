// Decoding a compressed Δ's rows, as `optkit compress delta` stores them (quant/delta_format.hpp),
// to floats: each value is (code − 2^(bits−1) + offset) · scale, with one scale per run of
// group_size columns; a 2:4 row keeps two values per group of four columns, at the positions its
// nibble names (the other two are zero; should a nibble name one column twice, the second value
// wins, as quant's reference decode has it). Which code runs is chosen at build time, as for
// dot_rows.hpp: on x86-64 (unless OPTKIT_PORTABLE_KERNELS) delta_decode_x86.cpp, AVX2 for the
// shapes it takes when the CPU has it; elsewhere delta_decode_portable.cpp's loops.
#pragma once

#include <cstdint>

namespace optkit::runtime {

// One stored Δ, in the artifact's bytes: codes [rows, words], kept positions [rows, cols/8] when
// sparse (else null), scales [rows, groups] widened to fp32.
struct DeltaCodes {
  int bits = 0; // 2, 4 or 8
  bool sparse = true;
  float offset = 0; // 0.5 with mid-rise levels
  std::int64_t cols = 0, words = 0, group_size = 0, groups = 0;
  const std::int32_t* values = nullptr;
  const std::uint8_t* indices = nullptr;
  const float* scales = nullptr;
};

// Rows [r0, r0 + n) into out[n, cols].
void decode_delta_rows(const DeltaCodes& codes, std::int64_t r0, std::int64_t n, float* out);

// The same in plain loops (SSE2 where the target has it): what portable builds run, and where the
// x86 kernels send the shapes they do not take.
void decode_delta_rows_loops(const DeltaCodes& codes, std::int64_t r0, std::int64_t n, float* out);

} // namespace optkit::runtime
