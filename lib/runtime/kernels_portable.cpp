// attend and silu_multiply in builds without x86 intrinsics (non-x86 hosts, or
// OPTKIT_PORTABLE_KERNELS): the plain loops of kernels.cpp.
#include "runtime/kernels.hpp"

namespace optkit::runtime {

void
silu_multiply(float* gate, const float* up, std::int64_t n) {
  silu_multiply_loops(gate, up, n);
}

void
attend(const float* queries, std::int64_t heads, const KvRows& cache, std::int64_t offset, std::int64_t first,
       std::int64_t position, std::int64_t head_dim, AttentionScores scores, float* scratch, float* out) {
  attend_loops(queries, heads, cache, offset, first, position, head_dim, scores, scratch, out);
}

const char*
attention_kernel() {
  return "portable";
}

} // namespace optkit::runtime
