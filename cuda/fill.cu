#include "check.cuh"
#include "fill.cuh"

#include <algorithm>

namespace optkit::cuda {
namespace {

__device__ __forceinline__ std::uint32_t
hash32(std::uint64_t i, std::uint32_t seed) {
  auto x = static_cast<std::uint32_t>(i * 0x9E3779B97F4A7C15ull >> 32) ^ seed;
  x ^= x >> 16;
  x *= 0x7feb352d;
  x ^= x >> 15;
  x *= 0x846ca68b;
  x ^= x >> 16;
  return x;
}

__global__ void
fill_bytes(std::uint8_t* p, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    p[i] = static_cast<std::uint8_t>(hash32(i, seed) & 0xBFu);
}

} // namespace

void
fill_finite_bytes(void* data, std::size_t bytes, std::uint32_t seed, cudaStream_t stream) {
  const int blocks = static_cast<int>(std::min<std::size_t>((bytes + 255) / 256, 4096));
  fill_bytes<<<blocks, 256, 0, stream>>>(static_cast<std::uint8_t*>(data), bytes, seed);
  check(cudaGetLastError(), "fill kernel");
}

} // namespace optkit::cuda
