#include "check.cuh"
#include "gemm.cuh"

namespace optkit::cuda {

GemmTypes
gemm_types(GemmKind kind) {
  switch (kind) {
  case GemmKind::fp16:
    return {CUDA_R_16F, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 2, 2};
  case GemmKind::fp8:
    return {CUDA_R_8F_E4M3, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, 1, 2};
  case GemmKind::int8:
    return {CUDA_R_8I, CUDA_R_32I, CUDA_R_32I, CUBLAS_COMPUTE_32I, 1, 4};
  case GemmKind::bf16:
    break;
  }
  return {CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, 2, 2};
}

LtMatmul::LtMatmul(const CublasLtLibrary& lt, cublasLtHandle_t handle, cublasComputeType_t compute,
                   cudaDataType_t scale, cublasOperation_t trans_a, cublasOperation_t trans_b, const Operand& a,
                   const Operand& b, const Operand& d, std::size_t workspace_bytes, float alpha)
    : m_lt(lt), m_handle(handle), m_integer(scale == CUDA_R_32I), m_alpha(alpha), m_workspace_bytes(workspace_bytes) {
  check(lt.desc_create(&m_desc, compute, scale), "cublasLtMatmulDescCreate");
  check(lt.desc_set(m_desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a), "TRANSA");
  check(lt.desc_set(m_desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b), "TRANSB");
  m_a = layout(a);
  m_b = layout(b);
  m_d = layout(d);
  cublasLtMatmulPreference_t preference = nullptr;
  check(lt.preference_create(&preference), "cublasLtMatmulPreferenceCreate");
  lt.preference_set(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof workspace_bytes);
  int found = 0;
  const auto status = lt.heuristic(handle, m_desc, m_a, m_b, m_d, m_d, preference, 1, &m_choice, &found);
  lt.preference_destroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0)
    throw std::runtime_error("cuBLASLt offers no algorithm for this product (type or shape unsupported)");
}

LtMatmul::~LtMatmul() {
  for (auto l : {m_a, m_b, m_d})
    if (l != nullptr)
      m_lt.layout_destroy(l);
  if (m_desc != nullptr)
    m_lt.desc_destroy(m_desc);
}

void
LtMatmul::run(const void* a, const void* b, void* d, void* workspace, cudaStream_t stream) const {
  const int int_alpha = 1, int_beta = 0;
  const float beta = 0.0f;
  const void* alpha = m_integer ? static_cast<const void*>(&int_alpha) : static_cast<const void*>(&m_alpha);
  const void* zero = m_integer ? static_cast<const void*>(&int_beta) : static_cast<const void*>(&beta);
  check(m_lt.matmul(m_handle, m_desc, alpha, a, m_a, b, m_b, zero, d, m_d, d, m_d, &m_choice.algo, workspace,
                    m_workspace_bytes, stream),
        "cublasLtMatmul");
}

cublasLtMatrixLayout_t
LtMatmul::layout(const Operand& o) const {
  cublasLtMatrixLayout_t l = nullptr;
  check(m_lt.layout_create(&l, o.type, static_cast<std::uint64_t>(o.rows), static_cast<std::uint64_t>(o.cols), o.ld),
        "cublasLtMatrixLayoutCreate");
  if (o.batch > 1) {
    check(m_lt.layout_set(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &o.batch, sizeof o.batch), "BATCH_COUNT");
    check(m_lt.layout_set(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &o.stride, sizeof o.stride),
          "STRIDED_BATCH_OFFSET");
  }
  return l;
}

} // namespace optkit::cuda
