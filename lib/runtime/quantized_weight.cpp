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

// One row of packed `Bits`-bit values (compressed-tensors' pack-quantized: value c in bits
// [Bits·(c mod n), …) of word c / n, n = 32 / Bits, stored with an offset of 2^(Bits−1)) times
// its group's scale, word by word: no division per value, and each word's values unrolled. Needs
// group_size to be a multiple of n, so every group starts on a word.
template <int Bits>
void
unpack_scaled_row(const std::int32_t* words, std::int64_t cols, const float* scales, std::int64_t group_size,
                  float* out) {
  constexpr int kPerWord = 32 / Bits;
  constexpr std::uint32_t kMask = (1u << Bits) - 1u;
  constexpr int kOffset = 1 << (Bits - 1);
  const auto value = [](std::int32_t word, int j) {
    return static_cast<float>(static_cast<int>((static_cast<std::uint32_t>(word) >> (Bits * j)) & kMask) - kOffset);
  };
  for (std::int64_t start = 0; start < cols; start += group_size) {
    const float scale = scales[start / group_size];
    const std::int64_t end = std::min(cols, start + group_size);
    const std::int32_t* word = words + start / kPerWord;
    std::int64_t c = start;
    for (; c + kPerWord <= end; c += kPerWord, ++word)
      for (int j = 0; j < kPerWord; ++j)
        out[c + j] = value(*word, j) * scale;
    for (int j = 0; c < end; ++c, ++j) // the row's last, partial word
      out[c] = value(*word, j) * scale;
  }
}

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
  std::uint64_t storage_bytes() const override { return m.values.size() + m.scales.size() * 2 + m.scale_codes.size(); }
  std::string format() const override {
    switch (m.storage) {
    case QuantizedStorage::int8_values:
      return m.input_activations ? "int8 w8a8" : "int8";
    case QuantizedStorage::packed_int32:
      return fmt::format("int{} g{}{}", m.bits, m.group_size, m.zeros.empty() ? "" : " asymmetric");
    case QuantizedStorage::fp8_values:
      return fmt::format("fp8{}{}", m_groups > 1 ? fmt::format(" g{}", m.group_size) : "",
                         m.input_activations ? " w8a8" : "");
    case QuantizedStorage::fp4_packed:
      return fmt::format("{}{}", m.fp4_scales == Fp4Scales::e8m0 ? "mxfp4" : "nvfp4",
                         m.input_activations ? " w4a4" : "");
    }
    return "?";
  }

  void row(std::int64_t r, float* out) const override {
    // The loop bounds in locals: read through `this` they would be re-read (and, in the sanitizer
    // build, type-checked) for every value.
    const std::int64_t cols = m.cols, group_size = m.group_size;
    const float* scales = m.scales.empty() ? nullptr : m.scales.data() + r * m_groups; // FP4: codes instead
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
      if (!m.zeros.empty()) {
        const float* zeros = m.zeros.data() + r * m_groups;
        for (std::int64_t c = 0; c < cols; ++c)
          out[c] = (static_cast<float>(quant::unpack_value(words, c, bits)) - zeros[c / group_size]) *
                   scales[c / group_size];
        break;
      }
      if (bits == 4 && group_size % 8 == 0)
        return unpack_scaled_row<4>(words, cols, scales, group_size, out);
      if (bits == 8 && group_size % 4 == 0)
        return unpack_scaled_row<8>(words, cols, scales, group_size, out);
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
    case QuantizedStorage::fp4_packed:
      fp4_row(r, out);
      break;
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
    quant::fake_quantize_activations(quantized.data(), rows_x, m.cols, *m.input_activations, m.input_global_scale);
    multiply_widened(*this, quantized.data(), rows_x, y, pool);
  }

private:
  // Row r of FP4 codes, two to a byte, each group's scale read from its code.
  void fp4_row(std::int64_t r, float* out) const {
    const std::int64_t cols = m.cols, group_size = m.group_size;
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(m.values.data()) + r * (cols / 2);
    const auto* codes = reinterpret_cast<const std::uint8_t*>(m.scale_codes.data()) + r * m_groups;
    for (std::int64_t g = 0; g < m_groups; ++g) {
      const float scale = m.fp4_scales == Fp4Scales::e8m0 ? quant::e8m0_to_float(codes[g])
                                                          : model::f8_e4m3_to_float(codes[g]) / m.global_scale;
      const std::int64_t end = std::min(cols, (g + 1) * group_size);
      for (std::int64_t c = g * group_size; c < end; ++c)
        out[c] = quant::fp4_value(quant::unpack_fp4_code(bytes, c)) * scale;
    }
  }

  const std::int8_t* int8_values() const { return reinterpret_cast<const std::int8_t*>(m.values.data()); }

  // The integer kernel computes exactly this scheme: int8 weights with one scale per row, int8
  // symmetric activations per token or per tensor (what int_w8a8 writes); anything else keeps
  // the float path.
  bool integer_products_apply() const {
    const auto& a = m.input_activations;
    return m.storage == QuantizedStorage::int8_values && m_groups == 1 && a && !a->is_float() && a->bits == 8 &&
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
  const bool fp4 = spec.storage == QuantizedStorage::fp4_packed;
  const auto scale_count = fp4 ? spec.scale_codes.size() : spec.scales.size();
  if (static_cast<std::int64_t>(scale_count) != spec.rows * groups)
    throw InputError(
        fmt::format("quantized weight: {} scales for {} rows x {} groups", scale_count, spec.rows, groups));
  if (!spec.zeros.empty() &&
      (spec.zeros.size() != spec.scales.size() || spec.storage != QuantizedStorage::packed_int32))
    throw InputError("quantized weight: zero points go with packed integers, one per scale");
  if (fp4 && (spec.cols % 2 != 0 || (spec.fp4_scales == Fp4Scales::fp8_under_global && !(spec.global_scale > 0))))
    throw InputError("quantized weight: FP4 needs an even column count and, for NVFP4, a positive global scale");
  std::uint64_t expected = static_cast<std::uint64_t>(spec.rows * spec.cols);
  if (spec.storage == QuantizedStorage::packed_int32)
    expected = static_cast<std::uint64_t>(spec.rows * quant::packed_words(spec.cols, spec.bits)) * 4;
  else if (fp4)
    expected /= 2;
  if (spec.values.size() != expected)
    throw InputError(fmt::format("quantized weight: {} bytes of values, expected {}", spec.values.size(), expected));
  return std::make_unique<QuantizedWeight>(std::move(spec));
}

} // namespace optkit::runtime
