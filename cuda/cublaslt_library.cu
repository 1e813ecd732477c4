#include "cublaslt_library.cuh"

#include <cstdlib>
#include <vector>

namespace optkit::cuda {

void
CublasLtLibrary::open() {
  std::vector<std::string> candidates;
  if (const char* path = std::getenv("OPTKIT_CUBLASLT"))
    candidates.emplace_back(path);
  for (const char* name : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}) {
    candidates.emplace_back(name);
    candidates.emplace_back(std::string("/usr/local/cuda/lib64/") + name);
  }
  for (const auto& candidate : candidates)
    if ((handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr)
      break;
  if (handle == nullptr)
    throw std::runtime_error("cannot load cuBLASLt (libcublasLt.so.13 or .12): install the CUDA toolkit's cuBLAS "
                             "or set OPTKIT_CUBLASLT to the library's path");
  resolve(create, "cublasLtCreate");
  resolve(destroy, "cublasLtDestroy");
  resolve(desc_create, "cublasLtMatmulDescCreate");
  resolve(desc_destroy, "cublasLtMatmulDescDestroy");
  resolve(desc_set, "cublasLtMatmulDescSetAttribute");
  resolve(layout_create, "cublasLtMatrixLayoutCreate");
  resolve(layout_destroy, "cublasLtMatrixLayoutDestroy");
  resolve(layout_set, "cublasLtMatrixLayoutSetAttribute");
  resolve(preference_create, "cublasLtMatmulPreferenceCreate");
  resolve(preference_destroy, "cublasLtMatmulPreferenceDestroy");
  resolve(preference_set, "cublasLtMatmulPreferenceSetAttribute");
  resolve(heuristic, "cublasLtMatmulAlgoGetHeuristic");
  resolve(matmul, "cublasLtMatmul");
}

} // namespace optkit::cuda
