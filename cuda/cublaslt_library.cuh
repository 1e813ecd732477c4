// cuBLASLt opened with dlopen at run time, like the driver, so optkit's binary keeps no CUDA
// library dependency and starts on machines without one.
#pragma once

#include <cublasLt.h>

#include <stdexcept>
#include <string>

#include <dlfcn.h>

namespace optkit::cuda {

// Throws std::runtime_error "<what> failed with cuBLAS status N" unless the call succeeded.
inline void
check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + " failed with cuBLAS status " + std::to_string(int(status)));
}

// cuBLASLt's entry points, resolved from the shared library at run time.
struct CublasLtLibrary {
  void* handle = nullptr;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;

  // Loads the library (OPTKIT_CUBLASLT, else libcublasLt.so.13/.12 on the loader's path or under
  // /usr/local/cuda) and resolves every entry point; throws std::runtime_error naming what is missing.
  void open();

private:
  template <class F> void resolve(F& fn, const char* name) {
    fn = reinterpret_cast<F>(dlsym(handle, name));
    if (fn == nullptr)
      throw std::runtime_error(std::string("cuBLASLt has no symbol ") + name);
  }
};

} // namespace optkit::cuda
