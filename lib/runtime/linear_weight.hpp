// The weight interface of the runtime. Every linear layer is a LinearWeight: y = x · Wᵀ with
// W [rows = out features, cols = in features], fp32 activations and fp32 accumulation. The dense
// implementation reads F32 / BF16 / F16 tensors in place from the mapped safetensors file (zero
// copy; BF16 ones are packed into the AVX-512 kernels' panels at load where those run); quantized
// formats (int8 channel, int4 group, fp8, 2:4) implement the same interface and are chosen when
// the model is loaded, so the transformer code never changes per format.
#pragma once

#include "model/dtype.hpp"
#include "runtime/activation_precision.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace optkit {
class ThreadPool;
}

namespace optkit::runtime {

class LinearWeight {
public:
  virtual ~LinearWeight() = default;
  virtual std::int64_t rows() const = 0;
  virtual std::int64_t cols() const = 0;
  // y[m, rows] = x[m, cols] · Wᵀ; x and y are row-major and densely packed.
  virtual void multiply(const float* x, std::int64_t m, float* y, ThreadPool& pool) const = 0;
  // Row r of W as fp32 (used for embedding lookups and tests).
  virtual void row(std::int64_t r, float* out) const = 0;
  virtual std::string format() const = 0;
  virtual std::uint64_t storage_bytes() const = 0;
  // Whether it keeps reading the bytes it was made from (a dense weight over a mapped file does;
  // a BF16 one packed at load does not, so the loader lets those pages leave memory).
  virtual bool reads_source() const { return true; }
};

// Where a dense BF16 W lives once loaded:
//  - fastest: packed into the panels of the AVX-512 kernels when made, where the CPU prefers
//    that (panel_packing_preferred: AVX512_BF16 without AMX), else viewed in place;
//  - in_place: always viewed in place (a model whose layers are loaded all at once but used one
//    at a time, as calibration does: packing would copy every layer up front).
enum class WeightLayout { fastest, in_place };

// W stored densely in F32, BF16 or F16, row-major, viewed in place (the storage must outlive it),
// or for BF16 packed into panels when made (`layout`).
// `activations`: how a BF16 W multiplies its activations (runtime/activation_precision.hpp).
std::unique_ptr<LinearWeight> make_dense_weight(model::DType dtype, std::span<const std::byte> bytes, std::int64_t rows,
                                                std::int64_t cols,
                                                ActivationPrecision activations = ActivationPrecision::fp32,
                                                WeightLayout layout = WeightLayout::fastest);

// W computed in memory (calibration reconstructions, merged deltas), owned, fp32.
std::unique_ptr<LinearWeight> make_owned_dense_weight(std::vector<float> data, std::int64_t rows, std::int64_t cols);

// W as fp32, row-major [rows, cols].
std::vector<float> dense_floats(const LinearWeight& w);

// y = x · Wᵀ for any weight: blocks of rows decoded to fp32 with row(), one sgemm per block.
void multiply_widened(const LinearWeight& weight, const float* x, std::int64_t m, float* y, ThreadPool& pool);
// y = x · Wᵀ for a row-major fp32 W: one sgemm per block of rows, blocks split over the pool.
void multiply_fp32_rows(const float* w, std::int64_t rows, std::int64_t cols, const float* x, std::int64_t m, float* y,
                        ThreadPool& pool);

} // namespace optkit::runtime
