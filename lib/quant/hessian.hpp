// The GPTQ / SparseGPT layer Hessian H = 2/N · Σ XᵀX over the calibration inputs of one linear
// layer (N = calibration sequences seen), accumulated in fp32 with a symmetric rank-k update.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace optkit::quant {

class Hessian {
public:
  explicit Hessian(std::int64_t cols);

  // Adds the rows of x [rows, cols] (the inputs of `sequences` calibration sequences).
  void add(const float* x, std::int64_t rows, std::int64_t sequences);
  // H itself (both triangles), 2/N · Σ XᵀX.
  std::vector<float> matrix() const;
  // The same values, made in place of the accumulator (no second n × n copy): the Hessian is
  // empty afterwards.
  std::vector<float> take_matrix() &&;
  // Largest |x| seen per input column (SmoothQuant's activation statistic).
  const std::vector<float>& column_absmax() const { return m_absmax; }
  std::int64_t cols() const { return m_cols; }
  std::int64_t sequences() const { return m_sequences; }
  std::int64_t tokens() const { return m_tokens; }

private:
  std::int64_t m_cols;
  std::int64_t m_sequences = 0, m_tokens = 0;
  std::vector<float> m_sum; // upper triangle of 2 Σ XᵀX, row-major
  std::vector<float> m_absmax;
};

// H for inputs scaled per column by 1/s (X' = X·diag(s)⁻¹): H'_ij = H_ij / (s_i s_j).
void rescale_hessian(std::vector<float>& h, std::int64_t cols, std::span<const float> s);

} // namespace optkit::quant
