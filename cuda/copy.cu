#include "copy.cuh"

namespace optkit::cuda {
namespace {

__global__ void
copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

} // namespace

void
launch_copy(const uint4* src, uint4* dst, std::size_t vectors, int blocks, cudaStream_t stream) {
  copy_kernel<<<blocks, 512, 0, stream>>>(src, dst, vectors);
}

} // namespace optkit::cuda
