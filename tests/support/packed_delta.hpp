// A delta artifact's packed Δ as cuda/device_linears.cuh uploads it (built only with CUDA).
#pragma once

#include "cuda/device_linears.cuh"
#include "quant/delta_format.hpp"

#include <vector>

namespace optkit::test {

// Module "m" of `artifact`; its scales are kept in `scales`, which must outlive the result.
inline cuda::PackedDelta
packed_delta(const quant::DeltaArtifact& artifact, std::int64_t rows, std::int64_t cols,
             std::vector<std::vector<float>>& scales) {
  const auto d = artifact.stored_delta("m", rows, cols);
  scales.push_back(d.scale.to_floats());
  return {d.bits, d.sparse, d.offset, d.words, d.group_size, d.groups, d.values, d.indices, scales.back().data()};
}

} // namespace optkit::test
