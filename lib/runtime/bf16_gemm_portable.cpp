// Builds without x86 intrinsics (non-x86 hosts, or OPTKIT_PORTABLE_KERNELS): no BF16 dot-product
// instructions, so bf16_gemm_supported() is false and the runtime widens BF16 weights for sgemm.
#include "runtime/bf16_gemm.hpp"

#include <stdexcept>

namespace optkit::runtime {

bool
bf16_gemm_supported() {
  return false;
}

PackedActivations
pack_activations(const float*, std::int64_t, std::int64_t, Bf16Activations) {
  throw std::logic_error("pack_activations: this build has no BF16 kernels; check bf16_gemm_supported() first");
}

void
bf16_gemm_rows(const Bf16*, std::int64_t, std::int64_t, const PackedActivations&, float*, std::int64_t) {
  throw std::logic_error("bf16_gemm_rows: this build has no BF16 kernels; check bf16_gemm_supported() first");
}

} // namespace optkit::runtime
