#include "runtime/ggml_weight.hpp"

#include "model/gguf_names.hpp"
#include "quant/ggml_blocks.hpp"

#include <fmt/format.h>

namespace optkit::runtime {

namespace {

class GgmlWeight final : public LinearWeight {
public:
  explicit GgmlWeight(const model::GgufMatrix& matrix)
      : m_matrix(matrix)
      , m_row_bytes(model::ggml_row_bytes(matrix.type, matrix.cols))
      , m_head_dim(matrix.rope_head_dim) {}

  std::int64_t rows() const override { return m_matrix.rows; }
  std::int64_t cols() const override { return m_matrix.cols; }
  std::string format() const override {
    return fmt::format("gguf {}{}", model::ggml_type_name(m_matrix.type), m_head_dim > 0 ? " (RoPE rows)" : "");
  }
  std::uint64_t storage_bytes() const override { return m_matrix.bytes.size(); }
  void row(std::int64_t r, float* out) const override {
    const std::int64_t stored = m_head_dim > 0 ? model::gguf_rope_row(r, m_head_dim) : r;
    quant::dequantize_row(m_matrix.type, m_matrix.bytes.data() + stored * m_row_bytes, m_matrix.cols, out);
  }
  // The activations rounded first as llama.cpp's CPU kernels round them for this weight type, so a
  // GGUF scores and generates as it does in llama.cpp.
  void multiply(const float* x, std::int64_t m, float* y, ThreadPool& pool) const override {
    thread_local std::vector<float> rounded;
    rounded.assign(x, x + m * m_matrix.cols);
    for (std::int64_t r = 0; r < m; ++r)
      quant::round_dot_product_input(m_matrix.type,
                                     {rounded.data() + r * m_matrix.cols, static_cast<std::size_t>(m_matrix.cols)});
    multiply_widened(*this, rounded.data(), m, y, pool);
  }

private:
  model::GgufMatrix m_matrix;
  std::int64_t m_row_bytes;
  std::int64_t m_head_dim;
};

} // namespace

std::unique_ptr<LinearWeight>
make_ggml_weight(const model::GgufMatrix& matrix) {
  return std::make_unique<GgmlWeight>(matrix);
}

} // namespace optkit::runtime
