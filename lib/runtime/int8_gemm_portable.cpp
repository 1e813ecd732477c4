// Builds without x86 intrinsics: no integer W8A8 kernel, so int8_gemm_supported() is false and the
// runtime keeps the float path.
#include "runtime/int8_gemm.hpp"

#include <stdexcept>

namespace optkit::runtime {

bool
int8_gemm_supported() {
  return false;
}

QuantizedActivations
quantize_activations_u8(const float*, std::int64_t, std::int64_t, bool) {
  throw std::logic_error("quantize_activations_u8: this build has no int8 kernels; check int8_gemm_supported()");
}

std::vector<std::int32_t>
int8_row_offsets(const std::int8_t*, std::int64_t, std::int64_t) {
  throw std::logic_error("int8_row_offsets: this build has no int8 kernels; check int8_gemm_supported()");
}

void
int8_gemm_rows(const std::int8_t*, std::int64_t, std::int64_t, std::int64_t, std::span<const std::int32_t>,
               std::span<const float>, const QuantizedActivations&, float*, std::int64_t) {
  throw std::logic_error("int8_gemm_rows: this build has no int8 kernels; check int8_gemm_supported()");
}

} // namespace optkit::runtime
