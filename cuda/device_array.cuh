// Device memory for `count` values of T, grown on demand (the old contents are not kept) and freed
// with its owner.
#pragma once

#include "check.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

namespace optkit::cuda {

template <class T> struct DeviceArray {
  T* data = nullptr;
  std::size_t capacity = 0;

  DeviceArray() = default;
  DeviceArray(DeviceArray&& other) noexcept : data(other.data), capacity(other.capacity) {
    other.data = nullptr;
    other.capacity = 0;
  }
  DeviceArray& operator=(DeviceArray&&) = delete;
  DeviceArray(const DeviceArray&) = delete;
  ~DeviceArray() {
    if (data != nullptr)
      cudaFree(data);
  }

  // Room for `count` values; returns whether it had to allocate. `what` names the allocation in
  // the error when the device has no room.
  bool reserve(std::size_t count, const char* what = "cudaMalloc") {
    if (count <= capacity)
      return false;
    if (data != nullptr)
      check(cudaFree(data), "cudaFree");
    data = nullptr;
    capacity = 0;
    void* p = nullptr;
    check(cudaMalloc(&p, std::max<std::size_t>(count, 1) * sizeof(T)), what);
    data = static_cast<T*>(p);
    capacity = count;
    return true;
  }
  // cudaMemcpy from pageable memory may return before its DMA lands, and a non-blocking stream
  // does not wait for it: callers synchronise before kernels on such a stream read the values.
  void upload(const T* host, std::size_t count) {
    reserve(count);
    check(cudaMemcpy(data, host, count * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy (upload)");
  }
};

} // namespace optkit::cuda
