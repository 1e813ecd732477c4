#include "quant/hessian.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cblas.h>
#include <cmath>

namespace optkit::quant {

Hessian::Hessian(std::int64_t cols)
    : m_cols(cols)
    , m_sum(static_cast<std::size_t>(cols * cols), 0.0f)
    , m_absmax(static_cast<std::size_t>(cols), 0.0f) {}

void
Hessian::add(const float* x, std::int64_t rows, std::int64_t sequences) {
  if (rows <= 0)
    return;
  cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, static_cast<int>(m_cols), static_cast<int>(rows), 2.0f, x,
              static_cast<int>(m_cols), 1.0f, m_sum.data(), static_cast<int>(m_cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < m_cols; ++c) {
      auto& m = m_absmax[static_cast<std::size_t>(c)];
      m = std::max(m, std::fabs(x[r * m_cols + c]));
    }
  m_sequences += sequences;
  m_tokens += rows;
}

std::vector<float>
Hessian::matrix() const {
  if (m_sequences == 0)
    throw RuntimeFailure("Hessian has no calibration data");
  const auto n = static_cast<std::size_t>(m_cols);
  const float inv = 1.0f / static_cast<float>(m_sequences);
  std::vector<float> h(n * n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i; j < n; ++j)
      h[i * n + j] = h[j * n + i] = m_sum[i * n + j] * inv;
  return h;
}

std::vector<float>
Hessian::take_matrix() && {
  if (m_sequences == 0)
    throw RuntimeFailure("Hessian has no calibration data");
  const auto n = static_cast<std::size_t>(m_cols);
  const float inv = 1.0f / static_cast<float>(m_sequences);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i; j < n; ++j) // the lower triangle written is never read again
      m_sum[i * n + j] = m_sum[j * n + i] = m_sum[i * n + j] * inv;
  m_sequences = m_tokens = 0;
  return std::move(m_sum);
}

void
rescale_hessian(std::vector<float>& h, std::int64_t cols, std::span<const float> s) {
  const auto n = static_cast<std::size_t>(cols);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      h[i * n + j] /= s[i] * s[j];
}

} // namespace optkit::quant
