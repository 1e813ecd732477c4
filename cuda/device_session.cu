#include "device_session.cuh"

#include <stdexcept>
#include <string>

namespace optkit::cuda {

DeviceSession::DeviceSession(int device_index) : device(device_index) {
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (device < 0 || device >= count)
    throw std::runtime_error("no CUDA device " + std::to_string(device) + " (" + std::to_string(count) + " visible)");
  try {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
    lt.open();
    check(lt.create(&handle), "cublasLtCreate");
    check(cudaMalloc(&workspace, kWorkspaceBytes), "cudaMalloc (workspace)");
  } catch (...) {
    release();
    throw;
  }
}

DeviceSession::~DeviceSession() {
  cudaSetDevice(device);
  cudaDeviceSynchronize();
  release();
}

void
DeviceSession::release() {
  if (workspace != nullptr)
    cudaFree(workspace);
  if (handle != nullptr)
    lt.destroy(handle);
  if (start != nullptr)
    cudaEventDestroy(start);
  if (stop != nullptr)
    cudaEventDestroy(stop);
  if (stream != nullptr)
    cudaStreamDestroy(stream);
  workspace = nullptr;
  handle = nullptr;
  start = stop = nullptr;
  stream = nullptr;
}

} // namespace optkit::cuda
