// Portable builds: no integer Δ kernel (runtime/delta_int8.hpp); the float path runs.
#include "runtime/delta_int8.hpp"

#include "core/error.hpp"

namespace optkit::runtime {

std::vector<DeltaInt8Kernel>
delta_int8_kernels() {
  return {};
}

bool
delta_int8_cpu() {
  return false;
}

bool
delta_int8_supported(const DeltaCodes&, bool) {
  return false;
}

bool
delta_pairs_distinct(const DeltaCodes&, std::int64_t) {
  return false;
}

std::vector<float>
delta_int8_row_offsets(const DeltaCodes&, std::int64_t) {
  return {}; // no kernel to start
}

void
delta_int8_rows(const DeltaCodes&, std::span<const float>, std::int64_t, std::int64_t, const QuantizedActivations&,
                float*, std::int64_t) {
  throw RuntimeFailure("the integer Δ kernel is not in this build");
}

void
delta_int8_rows(DeltaInt8Kernel, const DeltaCodes&, std::span<const float>, std::int64_t, std::int64_t,
                const QuantizedActivations&, float*, std::int64_t) {
  throw RuntimeFailure("the integer Δ kernel is not in this build");
}

} // namespace optkit::runtime
