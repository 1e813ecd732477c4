// Builds without x86 intrinsics (non-x86 hosts, or OPTKIT_PORTABLE_KERNELS): no AVX-512 panel
// kernels, so panel_gemm_supported() is false and the runtime uses OpenBLAS sgemm (BF16 widened).
#include "runtime/panel_gemm.hpp"

#include <stdexcept>

namespace optkit::runtime {

bool
panel_gemm_supported(PanelProduct) {
  return false;
}

const char*
bf16_gemm_kernel_name() {
  return "widened sgemm";
}

bool
panel_packing_preferred(PanelProduct) {
  return false;
}

std::optional<PanelKernel>
panel_gemm_kernel(PanelProduct, std::int64_t) {
  return std::nullopt;
}

PackedActivations
pack_activations(const float*, std::int64_t, std::int64_t, PanelProduct, std::optional<PanelKernel>) {
  throw std::logic_error("pack_activations: this build has no panel kernels; check panel_gemm_supported() first");
}

void
panel_gemm_rows(const Bf16*, std::int64_t, std::int64_t, const PackedActivations&, float*, std::int64_t) {
  throw std::logic_error("panel_gemm_rows: this build has no panel kernels; check panel_gemm_supported() first");
}

void
panel_gemm_rows(const float*, std::int64_t, std::int64_t, const PackedActivations&, float*, std::int64_t) {
  throw std::logic_error("panel_gemm_rows: this build has no panel kernels; check panel_gemm_supported() first");
}

void
panel_gemm_rows(const PackedPanels&, std::int64_t, std::int64_t, const PackedActivations&, float*, std::int64_t) {
  throw std::logic_error("panel_gemm_rows: this build has no panel kernels; check panel_gemm_supported() first");
}

void
pack_weight_panels(const Bf16*, std::int64_t, std::int64_t, std::uint32_t*) {
  throw std::logic_error("pack_weight_panels: this build has no panel kernels; check panel_packing_preferred() first");
}

} // namespace optkit::runtime
