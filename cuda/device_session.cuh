// One CUDA device opened for timed work: a non-blocking stream, two timing events, cuBLASLt (loaded
// at run time) with a handle and a workspace, and the timing rule every figure of optkit's CUDA
// harnesses follows.
#pragma once

#include "check.cuh"
#include "cublaslt_library.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace optkit::cuda {

struct DeviceSession {
  static constexpr std::size_t kWorkspaceBytes = std::size_t(32) << 20;
  int device = 0;
  cudaDeviceProp properties{};
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  CublasLtLibrary lt;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;

  // Opens device `device` (of those CUDA_VISIBLE_DEVICES shows) and cuBLASLt; throws
  // std::runtime_error naming what is missing, having released what it took.
  explicit DeviceSession(int device);
  ~DeviceSession(); // waits for the device, then releases (the library stays loaded)
  DeviceSession(const DeviceSession&) = delete;
  DeviceSession& operator=(const DeviceSession&) = delete;

  // Makes this session's device the calling thread's current one (CUDA keeps it per thread: a
  // session opened on one thread and used from another would otherwise launch on device 0).
  void make_current() const { check(cudaSetDevice(device), "cudaSetDevice"); }

  // Median over 7 measurements of the mean time of a batch of launches (about 2 ms each), in
  // microseconds, after two warm-up launches.
  template <class Launch> double time_us(Launch&& launch) {
    launch();
    launch();
    check(cudaStreamSynchronize(stream), "warm-up");
    float ms = 0;
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    launch();
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    const int per_batch = std::clamp(static_cast<int>(2.0f / std::max(ms, 1e-3f)), 1, 200);
    std::vector<double> samples;
    for (int r = 0; r < 7; ++r) {
      check(cudaEventRecord(start, stream), "cudaEventRecord");
      for (int i = 0; i < per_batch; ++i)
        launch();
      check(cudaEventRecord(stop, stream), "cudaEventRecord");
      check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      samples.push_back(1000.0 * static_cast<double>(ms) / per_batch);
    }
    check(cudaGetLastError(), "timed launches");
    std::nth_element(samples.begin(), samples.begin() + 3, samples.end());
    return samples[3];
  }

private:
  void release();
};

} // namespace optkit::cuda
