#include "runtime/quantized_weight.hpp"

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "model/dtype.hpp"
#include "quant/packing.hpp"
#include "quant/quantizer.hpp"
#include "runtime/int8_gemm.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace optkit::runtime {

namespace {

class QuantizedWeight final : public LinearWeight {
public:
  explicit QuantizedWeight(QuantizedWeightSpec spec) : m(std::move(spec)) {
    m_groups = (m.cols + m.group_size - 1) / m.group_size;
    m_words = quant::packed_words(m.cols, m.bits);
    if (integer_products_apply())
      m_row_offsets = int8_row_offsets(int8_values(), m.rows, m.cols);
  }

  std::int64_t rows() const override { return m.rows; }
  std::int64_t cols() const override { return m.cols; }
  std::uint64_t storage_bytes() const override { return m.values.size() + m.scales.size() * 2; }
  std::string format() const override {
    switch (m.storage) {
    case QuantizedStorage::int8_values:
      return m.input_activations ? "int8 w8a8" : "int8";
    case QuantizedStorage::packed_int32:
      return fmt::format("int{} g{}", m.bits, m.group_size);
    case QuantizedStorage::fp8_values:
      return m.input_activations ? "fp8 w8a8" : "fp8";
    }
    return "?";
  }

  void row(std::int64_t r, float* out) const override {
    // The loop bounds in locals: read through `this` they would be re-read (and, in the sanitizer
    // build, type-checked) for every value.
    const std::int64_t cols = m.cols, group_size = m.group_size;
    const float* scales = m.scales.data() + r * m_groups;
    switch (m.storage) {
    case QuantizedStorage::int8_values: {
      const auto* v = reinterpret_cast<const std::int8_t*>(m.values.data()) + r * cols;
      for (std::int64_t c = 0; c < cols; ++c)
        out[c] = static_cast<float>(v[c]) * scales[c / group_size];
      break;
    }
    case QuantizedStorage::packed_int32: {
      const auto* words = reinterpret_cast<const std::int32_t*>(m.values.data()) + r * m_words;
      const int bits = m.bits;
      for (std::int64_t c = 0; c < cols; ++c)
        out[c] = static_cast<float>(quant::unpack_value(words, c, bits)) * scales[c / group_size];
      break;
    }
    case QuantizedStorage::fp8_values: {
      const auto* v = reinterpret_cast<const std::uint8_t*>(m.values.data()) + r * cols;
      for (std::int64_t c = 0; c < cols; ++c)
        out[c] = model::f8_e4m3_to_float(v[c]) * scales[c / group_size];
      break;
    }
    }
  }

  void multiply(const float* x, std::int64_t rows_x, float* y, ThreadPool& pool) const override {
    if (!m.input_activations) {
      multiply_widened(*this, x, rows_x, y, pool);
      return;
    }
    if (!m_row_offsets.empty()) { // W8A8 in integers (VNNI)
      const auto quantized =
          quantize_activations_u8(x, rows_x, m.cols, m.input_activations->strategy == quant::Strategy::tensor);
      const std::int64_t chunk =
          rows_x == 1 ? std::max<std::int64_t>(16, m.rows / (8 * static_cast<std::int64_t>(pool.size()))) : 64;
      pool.parallel_for(
          m.rows,
          [&](std::int64_t r0, std::int64_t r1) {
            int8_gemm_rows(int8_values(), m.cols, r0, r1, m_row_offsets, m.scales, quantized, y, m.rows);
          },
          chunk);
      return;
    }
    std::vector<float> quantized(x, x + rows_x * m.cols);
    quant::fake_quantize_activations(quantized.data(), rows_x, m.cols, *m.input_activations);
    multiply_widened(*this, quantized.data(), rows_x, y, pool);
  }

private:
  const std::int8_t* int8_values() const { return reinterpret_cast<const std::int8_t*>(m.values.data()); }

  // The integer kernel computes exactly this scheme: int8 weights with one scale per row, int8
  // symmetric activations per token or per tensor (what int_w8a8 writes); anything else keeps
  // the float path.
  bool integer_products_apply() const {
    const auto& a = m.input_activations;
    return m.storage == QuantizedStorage::int8_values && m_groups == 1 && a && !a->is_fp8() && a->bits == 8 &&
           a->symmetric && (a->strategy == quant::Strategy::token || a->strategy == quant::Strategy::tensor) &&
           int8_gemm_supported();
  }

  QuantizedWeightSpec m;
  std::int64_t m_groups = 1, m_words = 0;
  std::vector<std::int32_t> m_row_offsets; // 128·Σ_c q_w[r, c]; empty: the float path
};

} // namespace

std::unique_ptr<LinearWeight>
make_quantized_weight(QuantizedWeightSpec spec) {
  if (spec.group_size <= 0 || spec.rows <= 0 || spec.cols <= 0)
    throw InputError("quantized weight: empty shape or group size");
  const std::int64_t groups = (spec.cols + spec.group_size - 1) / spec.group_size;
  if (static_cast<std::int64_t>(spec.scales.size()) != spec.rows * groups)
    throw InputError(
        fmt::format("quantized weight: {} scales for {} rows x {} groups", spec.scales.size(), spec.rows, groups));
  const std::uint64_t expected =
      spec.storage == QuantizedStorage::packed_int32
          ? static_cast<std::uint64_t>(spec.rows * quant::packed_words(spec.cols, spec.bits)) * 4
          : static_cast<std::uint64_t>(spec.rows * spec.cols);
  if (spec.values.size() != expected)
    throw InputError(fmt::format("quantized weight: {} bytes of values, expected {}", spec.values.size(), expected));
  return std::make_unique<QuantizedWeight>(std::move(spec));
}

} // namespace optkit::runtime
