// The one place CUDA errors are turned into optkit errors.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace optkit::cuda {

// Text of a CUDA error, "ok" for cudaSuccess.
inline std::string
error_text(cudaError_t err) {
  return err == cudaSuccess ? std::string("ok") : std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

// Throws std::runtime_error "<what>: <CUDA error>" unless `err` is cudaSuccess.
inline void
check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + error_text(err));
}

} // namespace optkit::cuda

// Evaluates a CUDA runtime call; on failure returns its message from the enclosing function,
// which must return std::string (empty on success).
#define OPTKIT_CUDA_TRY(call)                                                                                          \
  do {                                                                                                                 \
    const cudaError_t optkit_cuda_err_ = (call);                                                                       \
    if (optkit_cuda_err_ != cudaSuccess) {                                                                             \
      return std::string(#call) + " failed: " + ::optkit::cuda::error_text(optkit_cuda_err_);                          \
    }                                                                                                                  \
  } while (0)
