// Device-to-device copy as a kernel (16-byte vectors, grid-stride), the bandwidth probe of
// `plan profile`.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace optkit::cuda {

// Copies `vectors` 16-byte vectors from `src` to `dst` with `blocks` blocks of 512 threads.
void launch_copy(const uint4* src, uint4* dst, std::size_t vectors, int blocks, cudaStream_t stream);

} // namespace optkit::cuda
