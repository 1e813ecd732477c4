#include "plan/operator_timer.hpp"

#include "core/build_config.hpp"
#include "core/error.hpp"

#if OPTKIT_HAVE_CUDA
#include "cuda/operator_profiler.cuh"

#include <stdexcept>
#endif

namespace optkit::plan {

#if OPTKIT_HAVE_CUDA
namespace {

class CudaOperatorTimer final : public OperatorTimer {
public:
  explicit CudaOperatorTimer(int device) : m_profiler(device) {}
  std::string device_name() const override { return m_profiler.device_name(); }
  bool supports_gemm(const std::string& kind) const override {
    const auto gemm = cuda::parse_gemm_kind(kind);
    return gemm && m_profiler.supports_gemm(*gemm);
  }
  double gemm_us(const std::string& kind, int m, int n, int k) override {
    const auto gemm = cuda::parse_gemm_kind(kind);
    if (!gemm)
      throw std::runtime_error("no CUDA GEMM of kind '" + kind + "' (bf16, fp16, fp8, int8)");
    return m_profiler.gemm_us(*gemm, m, n, k);
  }
  double attention_prefill_us(int batch, int seq, int heads, int kv_heads, int head_dim) override {
    return m_profiler.attention_prefill_us(batch, seq, heads, kv_heads, head_dim);
  }
  double attention_decode_us(int batch, int kv_len, int heads, int kv_heads, int head_dim) override {
    return m_profiler.attention_decode_us(batch, kv_len, heads, kv_heads, head_dim);
  }
  double copy_us(std::uint64_t bytes) override { return m_profiler.copy_us(bytes); }

private:
  cuda::OperatorProfiler m_profiler;
};

} // namespace

std::unique_ptr<OperatorTimer>
open_cuda_timer(int device) {
  try {
    return std::make_unique<CudaOperatorTimer>(device);
  } catch (const std::runtime_error& e) {
    throw RuntimeFailure(std::string("plan profile needs a CUDA GPU: ") + e.what() +
                         " (optkit doctor shows what this machine has)");
  }
}
#else
std::unique_ptr<OperatorTimer>
open_cuda_timer(int) {
  throw RuntimeFailure("plan profile needs a CUDA GPU, and this optkit was built without CUDA (rebuild where nvcc is "
                       "found; optkit --version lists the features)");
}
#endif

} // namespace optkit::plan
