// GPTQ's factor of the inverse Hessian, made in the Hessian's own n × n buffer. H is borrowed,
// not copied: at 8B's down_proj (14,336 inputs) one n × n matrix is 822 MB.
//
// The factor U (H⁻¹ = UᵀU of the prepared, damped H) lives in the upper triangle. The strictly
// lower triangle keeps H's values throughout, and the diagonal is saved aside, so H can be rebuilt
// for another dampening and is given back bit for bit when the factor is done with.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace optkit::quant {

// Column j of every row of a [rows, order.size()] row-major matrix becomes what column order[j]
// was, in place (one row held aside).
void gather_columns(std::span<float> a, std::size_t rows, const std::vector<std::size_t>& order);

class InverseHessianFactor {
public:
  // Prepares H (cols × cols, both triangles) as GPTQ factors it, in place: rows and columns in
  // `perm`'s order, and a dead input's zero diagonal set to 1.
  InverseHessianFactor(std::span<float> hessian, std::vector<std::size_t> perm);
  // Gives H back as it was handed in.
  ~InverseHessianFactor();
  InverseHessianFactor(const InverseHessianFactor&) = delete;
  InverseHessianFactor& operator=(const InverseHessianFactor&) = delete;

  // Factors H + damp·mean(diag H)·I; false (and the prepared H restored) when it is not positive
  // definite.
  bool factor(double damp);
  // U's row i (entries at columns ≥ i are U's; those below are not).
  const float* row(std::size_t i) const { return m_a.data() + i * m_n; }
  float diagonal(std::size_t i) const { return m_a[i * m_n + i]; }

private:
  void restore_prepared();

  std::span<float> m_a;
  std::size_t m_n;
  std::vector<std::size_t> m_perm;
  bool m_permuted;                        // perm is not the identity
  std::vector<float> m_prepared_diagonal; // permuted, dead inputs' 0 → 1
  std::vector<float> m_original_diagonal; // permuted, as handed in
};

} // namespace optkit::quant
