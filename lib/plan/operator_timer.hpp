// Something that times serving operators on one device, in microseconds: the CUDA profiler in
// cuda/ on a GPU, a model of one in the tests. `optkit plan profile` measures its sweep through it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace optkit::plan {

class OperatorTimer {
public:
  virtual ~OperatorTimer() = default;
  virtual std::string device_name() const = 0;
  virtual bool supports_gemm(const std::string& kind) const = 0;
  virtual double gemm_us(const std::string& kind, int m, int n, int k) = 0;
  virtual double attention_prefill_us(int batch, int seq, int heads, int kv_heads, int head_dim) = 0;
  virtual double attention_decode_us(int batch, int kv_len, int heads, int kv_heads, int head_dim) = 0;
  virtual double copy_us(std::uint64_t bytes) = 0;
};

// The CUDA device `device` (as CUDA_VISIBLE_DEVICES numbers them). RuntimeFailure naming the cause
// when this build has no CUDA, no device is visible or cuBLASLt cannot be loaded.
std::unique_ptr<OperatorTimer> open_cuda_timer(int device);

} // namespace optkit::plan
