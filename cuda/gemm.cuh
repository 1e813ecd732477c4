// Matrix products through cuBLASLt: a product is prepared once (descriptors, layouts and the
// algorithm cuBLASLt's heuristic picks) and then run as often as needed on a stream.
#pragma once

#include "cublaslt_library.cuh"
#include "gemm_kind.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace optkit::cuda {

// One column-major operand: rows × cols with leading dimension ld, `batch` of them `stride` apart.
struct Operand {
  cudaDataType_t type;
  std::int64_t rows, cols, ld;
  int batch = 1;
  std::int64_t stride = 0;
};

// A prepared cuBLASLt product D = alpha · op(A) · op(B) with the algorithm its heuristic picks.
// The cuBLASLt types of one GemmKind.
struct GemmTypes {
  cudaDataType_t input, output, scale;
  cublasComputeType_t compute;
  std::size_t input_bytes, output_bytes;
};
GemmTypes gemm_types(GemmKind kind);

// A prepared cuBLASLt product D = alpha · op(A) · op(B) with the algorithm its heuristic picks.
class LtMatmul {
public:
  LtMatmul(const CublasLtLibrary& lt, cublasLtHandle_t handle, cublasComputeType_t compute, cudaDataType_t scale,
           cublasOperation_t trans_a, cublasOperation_t trans_b, const Operand& a, const Operand& b, const Operand& d,
           std::size_t workspace_bytes, float alpha);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  void run(const void* a, const void* b, void* d, void* workspace, cudaStream_t stream) const;

private:
  const CublasLtLibrary& m_lt;
  cublasLtHandle_t m_handle;
  bool m_integer;
  float m_alpha;
  std::size_t m_workspace_bytes;
  cublasLtMatmulDesc_t m_desc = nullptr;
  cublasLtMatrixLayout_t m_a = nullptr, m_b = nullptr, m_d = nullptr;
  cublasLtMatmulHeuristicResult_t m_choice{};

  cublasLtMatrixLayout_t layout(const Operand& o) const;
};

} // namespace optkit::cuda
