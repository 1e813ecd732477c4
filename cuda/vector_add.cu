#include "check.cuh"
#include "vector_add.cuh"

#include <cmath>

namespace optkit::cuda {
namespace {

__global__ void
axpy_kernel(float a, const float* x, const float* y, float* z, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    z[i] = a * x[i] + y[i];
  }
}

std::string
run(int device, std::size_t n, AxpyCheck& check) {
  OPTKIT_CUDA_TRY(cudaSetDevice(device));
  std::vector<float> x(n), y(n), z(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 1000) * 0.001f;
    y[i] = 1.0f - static_cast<float>(i % 7);
  }
  const float a = 2.5f;
  const std::size_t bytes = n * sizeof(float);
  float *dx = nullptr, *dy = nullptr, *dz = nullptr;
  OPTKIT_CUDA_TRY(cudaMalloc(&dx, bytes));
  OPTKIT_CUDA_TRY(cudaMalloc(&dy, bytes));
  OPTKIT_CUDA_TRY(cudaMalloc(&dz, bytes));
  OPTKIT_CUDA_TRY(cudaMemcpy(dx, x.data(), bytes, cudaMemcpyHostToDevice));
  OPTKIT_CUDA_TRY(cudaMemcpy(dy, y.data(), bytes, cudaMemcpyHostToDevice));
  cudaEvent_t start, stop;
  OPTKIT_CUDA_TRY(cudaEventCreate(&start));
  OPTKIT_CUDA_TRY(cudaEventCreate(&stop));
  const int threads = 256;
  const int blocks = 1024;
  axpy_kernel<<<blocks, threads>>>(a, dx, dy, dz, n); // warm-up
  OPTKIT_CUDA_TRY(cudaGetLastError());
  OPTKIT_CUDA_TRY(cudaEventRecord(start));
  axpy_kernel<<<blocks, threads>>>(a, dx, dy, dz, n);
  OPTKIT_CUDA_TRY(cudaEventRecord(stop));
  OPTKIT_CUDA_TRY(cudaEventSynchronize(stop));
  float ms = 0;
  OPTKIT_CUDA_TRY(cudaEventElapsedTime(&ms, start, stop));
  OPTKIT_CUDA_TRY(cudaMemcpy(z.data(), dz, bytes, cudaMemcpyDeviceToHost));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(dz);
  for (std::size_t i = 0; i < n; ++i) {
    check.max_abs_error = std::fmax(check.max_abs_error, std::fabs(static_cast<double>(z[i]) - (a * x[i] + y[i])));
  }
  check.gigabytes_per_second = ms > 0 ? 3.0 * static_cast<double>(bytes) / (ms * 1e6) : 0.0;
  return {};
}

} // namespace

AxpyCheck
run_axpy_check(int device, std::size_t n) {
  AxpyCheck check;
  check.error = run(device, n, check);
  return check;
}

} // namespace optkit::cuda
