#include "quant/inverse_hessian.hpp"

#include <algorithm>

extern "C" {
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info);
void spotri_(const char* uplo, const int* n, float* a, const int* lda, int* info);
}

namespace optkit::quant {

namespace {

using LapackRoutine = void(const char* uplo, const int* n, float* a, const int* lda, int* info);

// A LAPACK routine on the lower triangle. LAPACK sees a row-major matrix column-major: its lower
// triangle is our upper one, and with uplo 'L' it neither reads nor writes our strictly lower one.
bool
on_our_upper_triangle(LapackRoutine routine, std::span<float> a, int n) {
  int info = 0;
  const char lower = 'L';
  routine(&lower, &n, a.data(), &n, &info);
  return info == 0;
}

// Row i of `a` becomes what row order[i] was: rows move along the permutation's cycles, one held aside.
void
gather_rows(std::span<float> a, std::size_t n, const std::vector<std::size_t>& order) {
  std::vector<bool> placed(n, false);
  std::vector<float> held(n);
  for (std::size_t start = 0; start < n; ++start) {
    if (placed[start] || order[start] == start)
      continue;
    std::copy_n(a.begin() + static_cast<std::ptrdiff_t>(start * n), n, held.begin());
    std::size_t i = start;
    while (order[i] != start) {
      std::copy_n(a.begin() + static_cast<std::ptrdiff_t>(order[i] * n), n,
                  a.begin() + static_cast<std::ptrdiff_t>(i * n));
      placed[i] = true;
      i = order[i];
    }
    std::copy(held.begin(), held.end(), a.begin() + static_cast<std::ptrdiff_t>(i * n));
    placed[i] = true;
  }
}

void
permute_symmetric(std::span<float> a, std::size_t n, const std::vector<std::size_t>& order) {
  gather_rows(a, n, order);
  gather_columns(a, n, order);
}

// The upper triangle from the lower one, in tiles that stay in cache.
void
copy_lower_to_upper(std::span<float> a, std::size_t n) {
  constexpr std::size_t kTile = 64;
  for (std::size_t i0 = 0; i0 < n; i0 += kTile)
    for (std::size_t j0 = 0; j0 <= i0; j0 += kTile)
      for (std::size_t i = i0; i < std::min(n, i0 + kTile); ++i)
        for (std::size_t j = j0; j < std::min(i, j0 + kTile); ++j)
          a[j * n + i] = a[i * n + j];
}

bool
identity(const std::vector<std::size_t>& perm) {
  for (std::size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != i)
      return false;
  return true;
}

} // namespace

void
gather_columns(std::span<float> a, std::size_t rows, const std::vector<std::size_t>& order) {
  const auto n = order.size();
  std::vector<float> row(n);
  for (std::size_t r = 0; r < rows; ++r) {
    float* ar = a.data() + r * n;
    std::copy_n(ar, n, row.begin());
    for (std::size_t j = 0; j < n; ++j)
      ar[j] = row[order[j]];
  }
}

InverseHessianFactor::InverseHessianFactor(std::span<float> hessian, std::vector<std::size_t> perm)
    : m_a(hessian), m_n(perm.size()), m_perm(std::move(perm)), m_permuted(!identity(m_perm)) {
  if (m_permuted)
    permute_symmetric(m_a, m_n, m_perm);
  m_original_diagonal.resize(m_n);
  m_prepared_diagonal.resize(m_n);
  for (std::size_t i = 0; i < m_n; ++i) {
    m_original_diagonal[i] = m_a[i * m_n + i];
    m_prepared_diagonal[i] = m_original_diagonal[i] == 0.0f ? 1.0f : m_original_diagonal[i];
  }
  restore_prepared();
}

InverseHessianFactor::~InverseHessianFactor() {
  restore_prepared();
  for (std::size_t i = 0; i < m_n; ++i)
    m_a[i * m_n + i] = m_original_diagonal[i];
  if (!m_permuted)
    return;
  std::vector<std::size_t> inverse(m_n);
  for (std::size_t i = 0; i < m_n; ++i)
    inverse[m_perm[i]] = i;
  permute_symmetric(m_a, m_n, inverse);
}

void
InverseHessianFactor::restore_prepared() {
  copy_lower_to_upper(m_a, m_n);
  for (std::size_t i = 0; i < m_n; ++i)
    m_a[i * m_n + i] = m_prepared_diagonal[i];
}

bool
InverseHessianFactor::factor(double damp) {
  double mean_diag = 0;
  for (std::size_t i = 0; i < m_n; ++i)
    mean_diag += static_cast<double>(m_a[i * m_n + i]);
  mean_diag /= static_cast<double>(m_n);
  for (std::size_t i = 0; i < m_n; ++i)
    m_a[i * m_n + i] += static_cast<float>(damp * mean_diag);
  const int n = static_cast<int>(m_n);
  // H = LLᵀ, then H⁻¹ from L, then H⁻¹ = UᵀU: each step reads and writes the upper triangle only.
  if (on_our_upper_triangle(spotrf_, m_a, n) && on_our_upper_triangle(spotri_, m_a, n) &&
      on_our_upper_triangle(spotrf_, m_a, n))
    return true;
  restore_prepared();
  return false;
}

} // namespace optkit::quant
