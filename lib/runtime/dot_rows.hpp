// The row-dot kernel of dense weights: y[i·ldy + r] = Σ_c W[r, c]·x[i, c] for W's rows
// r ∈ [r0, r1) and activation rows i ∈ [0, m). Few activation rows (decode) go through it, so it
// is bound by streaming W. Which code runs is chosen at build time: on x86-64 (unless
// OPTKIT_PORTABLE_KERNELS) dot_rows_x86.cpp, with AVX-512 for one activation row and AVX2 + FMA +
// F16C for a few, as the CPU has them (chosen at run time); elsewhere
// (Arm hosts of GH200/GB200 nodes, or a portable build) dot_rows_portable.cpp's plain loops.
#pragma once

#include "model/dtype.hpp"

#include <cstdint>

namespace optkit::runtime {

struct Bf16 {
  std::uint16_t bits;
};
struct F16 {
  std::uint16_t bits;
};

inline float
to_float(float v) {
  return v;
}
inline float
to_float(Bf16 v) {
  return model::bf16_to_float(v.bits);
}
inline float
to_float(F16 v) {
  return model::f16_to_float(v.bits);
}

// Defined (and instantiated for float, Bf16 and F16) by the build's kernel file.
template <typename T>
void dot_rows(const T* w, std::int64_t cols, std::int64_t r0, std::int64_t r1, const float* x, std::int64_t m, float* y,
              std::int64_t ldy);

// The kernels dot_rows runs on this build and CPU, e.g. "avx512 (one activation row), avx2",
// "avx2" or "portable".
const char* dot_rows_kernel();

// The plain loops, for every build (and the fallback of the x86 kernels).
template <typename T>
void
dot_rows_loops(const T* w, std::int64_t cols, std::int64_t r0, std::int64_t r1, const float* x, std::int64_t m,
               float* y, std::int64_t ldy) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const T* wr = w + r * cols;
    for (std::int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * cols;
      float s = 0.0f;
      for (std::int64_t c = 0; c < cols; ++c)
        s += to_float(wr[c]) * xi[c];
      y[i * ldy + r] = s;
    }
  }
}

} // namespace optkit::runtime
