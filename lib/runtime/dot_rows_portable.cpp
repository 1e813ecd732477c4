// The row-dot kernels of builds without x86 intrinsics (non-x86 hosts, or OPTKIT_PORTABLE_KERNELS):
// the plain loops of dot_rows.hpp, which the compiler auto-vectorizes for the target.
#include "runtime/dot_rows.hpp"

namespace optkit::runtime {

template <typename T>
void
dot_rows(const T* w, std::int64_t cols, std::int64_t r0, std::int64_t r1, const float* x, std::int64_t m, float* y,
         std::int64_t ldy) {
  dot_rows_loops(w, cols, r0, r1, x, m, y, ldy);
}
template void dot_rows(const float*, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, float*,
                       std::int64_t);
template void dot_rows(const Bf16*, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, float*,
                       std::int64_t);
template void dot_rows(const F16*, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, float*,
                       std::int64_t);

const char*
dot_rows_kernel() {
  return "portable";
}

} // namespace optkit::runtime
