// Fills device memory with pseudo-random bytes that are finite values in every operand type.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace optkit::cuda {

// With bit 6 of each byte cleared an FP8 E4M3 byte is never NaN and a BF16/FP16 value stays below
// 2 in magnitude (its top exponent bit is clear). Asynchronous on `stream`.
void fill_finite_bytes(void* data, std::size_t bytes, std::uint32_t seed, cudaStream_t stream);

} // namespace optkit::cuda
