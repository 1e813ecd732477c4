// The decode of compressed Δ rows in builds without x86 intrinsics (non-x86 hosts, or
// OPTKIT_PORTABLE_KERNELS): the plain loops (see delta_decode.hpp).
#include "runtime/delta_decode.hpp"

namespace optkit::runtime {

void
decode_delta_rows(const DeltaCodes& codes, std::int64_t r0, std::int64_t n, float* out) {
  decode_delta_rows_loops(codes, r0, n, out);
}

} // namespace optkit::runtime
