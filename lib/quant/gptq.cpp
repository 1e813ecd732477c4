#include "quant/gptq.hpp"

#include "core/error.hpp"
#include "core/thread_pool.hpp"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <fmt/format.h>
#include <numeric>

extern "C" {
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info);
void spotri_(const char* uplo, const int* n, float* a, const int* lda, int* info);
}

namespace optkit::quant {

namespace {

// Cholesky in place of a symmetric row-major matrix; LAPACK sees it column-major, so its lower
// triangle is our upper one.
bool
cholesky_upper_rowmajor(std::vector<float>& a, int n) {
  int info = 0;
  const char lower = 'L';
  spotrf_(&lower, &n, a.data(), &n, &info);
  return info == 0;
}

// Columns by decreasing H diagonal (act-order), ties in column order.
std::vector<std::size_t>
act_order_permutation(const std::vector<float>& diagonal) {
  std::vector<std::size_t> perm(diagonal.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](std::size_t a, std::size_t b) { return diagonal[a] > diagonal[b]; });
  return perm;
}

// H as GPTQ factors it: dead inputs' zero diagonal set to 1, rows and columns in `perm`'s order.
// Built from the caller's H (which stays as it was) in one copy.
std::vector<float>
prepared_hessian(std::span<const float> hessian, const std::vector<std::size_t>& perm) {
  const auto n = perm.size();
  std::vector<float> h(n * n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      const float v = hessian[perm[i] * n + perm[j]];
      h[i * n + j] = i == j && v == 0.0f ? 1.0f : v;
    }
  return h;
}

// inverse_cholesky_upper over `a` itself.
bool
inverse_cholesky_upper_in_place(std::vector<float>& a, std::int64_t n64, double damp) {
  const auto n = static_cast<std::size_t>(n64);
  double mean_diag = 0;
  for (std::size_t i = 0; i < n; ++i)
    mean_diag += static_cast<double>(a[i * n + i]);
  mean_diag /= static_cast<double>(n);
  for (std::size_t i = 0; i < n; ++i)
    a[i * n + i] += static_cast<float>(damp * mean_diag);
  const int dim = static_cast<int>(n);
  if (!cholesky_upper_rowmajor(a, dim))
    return false;
  int info = 0;
  const char lower = 'L';
  spotri_(&lower, &dim, a.data(), &dim, &info); // H⁻¹ in our upper triangle
  if (info != 0)
    return false;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j)
      a[j * n + i] = a[i * n + j];
  if (!cholesky_upper_rowmajor(a, dim)) // H⁻¹ = UᵀU, U in our upper triangle
    return false;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < i; ++j)
      a[i * n + j] = 0.0f;
  return true;
}

} // namespace

std::optional<std::vector<float>>
inverse_cholesky_upper(std::span<const float> h, std::int64_t n, double damp) {
  std::vector<float> a(h.begin(), h.end());
  if (!inverse_cholesky_upper_in_place(a, n, damp))
    return std::nullopt;
  return a;
}

CompressedMatrix
gptq(std::span<const float> weight, std::int64_t rows, std::int64_t cols, std::span<const float> hessian,
     const std::optional<QuantArgs>& args, model::DType scale_dtype, const GptqOptions& o, ThreadPool& pool) {
  if (static_cast<std::int64_t>(weight.size()) != rows * cols ||
      static_cast<std::int64_t>(hessian.size()) != cols * cols)
    throw InputError(fmt::format("{}: weight or Hessian size does not match [{}, {}]", o.layer, rows, cols));
  if (o.sparse_2_4 && (cols % 4 != 0 || o.block_size % 4 != 0 || o.act_order))
    throw InputError(
        fmt::format("{}: 2:4 sparsity needs in_features and block_size divisible by 4 and no act-order", o.layer));
  const auto n = static_cast<std::size_t>(cols);
  CompressedMatrix out;
  out.rows = rows;
  out.cols = cols;
  std::vector<float> w(weight.begin(), weight.end());
  // Dead inputs (never active in calibration): nothing to preserve, weight set to zero.
  std::vector<float> diagonal(n);
  for (std::size_t i = 0; i < n; ++i) {
    diagonal[i] = hessian[i * n + i];
    if (diagonal[i] == 0.0f) {
      diagonal[i] = 1.0f;
      for (std::int64_t r = 0; r < rows; ++r)
        w[static_cast<std::size_t>(r) * n + i] = 0.0f;
    }
  }
  if (args)
    out.grid = compute_grid(w, rows, cols, *args, scale_dtype);
  std::vector<std::size_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  if (o.act_order) {
    perm = act_order_permutation(diagonal);
    std::vector<float> wp(w.size());
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < n; ++j)
        wp[static_cast<std::size_t>(r) * n + j] = w[static_cast<std::size_t>(r) * n + perm[j]];
    w.swap(wp);
  }
  // One n × n buffer: the prepared H, factored in place into U (rebuilt for each dampening tried).
  std::vector<float> U;
  bool factored = false;
  double damp = o.dampening;
  for (int attempt = 1; attempt <= o.max_damping_attempts; ++attempt, damp *= 10) {
    out.damping_attempts = attempt;
    U = prepared_hessian(hessian, perm);
    factored = inverse_cholesky_upper_in_place(U, cols, damp);
    if (factored)
      break;
  }
  if (!factored)
    throw RuntimeFailure(fmt::format("{}: the calibration Hessian is not positive definite even with dampening {:g} "
                                     "({} attempts); use more or more varied calibration samples",
                                     o.layer, damp / 10, o.max_damping_attempts));
  out.dampening = damp;

  std::vector<float> q_values(w.size(), 0.0f); // grid values (permuted order)
  std::vector<float> recon(w.size(), 0.0f);    // reconstruction (permuted order)
  std::vector<std::uint8_t> kept(o.sparse_2_4 ? w.size() : 0, 1);
  std::vector<double> row_loss(static_cast<std::size_t>(rows), 0.0);
  const std::int64_t block = std::max<std::int64_t>(1, o.block_size);
  std::vector<float> err(static_cast<std::size_t>(rows * block));
  for (std::int64_t i1 = 0; i1 < cols; i1 += block) {
    const std::int64_t i2 = std::min(cols, i1 + block), count = i2 - i1;
    pool.parallel_for(rows, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        float* wr = w.data() + r * cols;
        float* er = err.data() + r * count;
        bool pruned[4] = {false, false, false, false};
        for (std::int64_t i = i1; i < i2; ++i) {
          if (o.sparse_2_4 && (i - i1) % 4 == 0) {
            float score[4];
            for (int k = 0; k < 4; ++k) {
              const float d = U[static_cast<std::size_t>(i + k) * n + static_cast<std::size_t>(i + k)];
              score[k] = wr[i + k] * wr[i + k] / (d * d);
            }
            int order[4] = {0, 1, 2, 3};
            std::stable_sort(order, order + 4, [&](int a, int b) { return score[a] < score[b]; });
            for (int k = 0; k < 4; ++k)
              pruned[k] = (k == order[0] || k == order[1]);
          }
          const float x = wr[i];
          const float d = U[static_cast<std::size_t>(i) * n + static_cast<std::size_t>(i)];
          const auto c = static_cast<std::int64_t>(perm[static_cast<std::size_t>(i)]);
          float rec = x, qv = 0.0f;
          if (o.sparse_2_4 && pruned[(i - i1) % 4]) {
            rec = 0.0f;
            kept[static_cast<std::size_t>(r * cols + i)] = 0;
            if (out.grid && out.grid->args.levels == Levels::midtread)
              qv = out.grid->zero_at(r, c); // dequantizes to exactly 0
          } else if (out.grid) {
            const float s = out.grid->scale_at(r, c), z = out.grid->zero_at(r, c);
            qv = quantize_value(x, s, z, out.grid->args);
            rec = dequantize_value(qv, s, z);
          }
          q_values[static_cast<std::size_t>(r * cols + i)] = qv;
          recon[static_cast<std::size_t>(r * cols + i)] = rec;
          const float e = (x - rec) / d;
          row_loss[static_cast<std::size_t>(r)] += static_cast<double>(e * e);
          const float* ui = U.data() + static_cast<std::size_t>(i) * n;
          for (std::int64_t j = i + 1; j < i2; ++j)
            wr[j] -= e * ui[j];
          er[i - i1] = e;
        }
      }
    });
    if (i2 < cols)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(cols - i2),
                  static_cast<int>(count), -1.0f, err.data(), static_cast<int>(count),
                  U.data() + static_cast<std::size_t>(i1) * n + static_cast<std::size_t>(i2), static_cast<int>(cols),
                  1.0f, w.data() + i2, static_cast<int>(cols));
  }
  out.loss = std::accumulate(row_loss.begin(), row_loss.end(), 0.0) / 2.0;
  out.weight.resize(w.size());
  if (out.grid)
    out.q.resize(w.size());
  out.kept.resize(kept.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < n; ++j) {
      const auto src = static_cast<std::size_t>(r) * n + j, dst = static_cast<std::size_t>(r) * n + perm[j];
      out.weight[dst] = recon[src];
      if (!out.q.empty())
        out.q[dst] = q_values[src];
      if (!out.kept.empty())
        out.kept[dst] = kept[src];
    }
  return out;
}

CompressedMatrix
rtn(std::span<const float> weight, std::int64_t rows, std::int64_t cols, const QuantArgs& args,
    model::DType scale_dtype) {
  CompressedMatrix out;
  out.rows = rows;
  out.cols = cols;
  out.grid = compute_grid(weight, rows, cols, args, scale_dtype);
  out.weight.resize(weight.size());
  out.q.resize(weight.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const auto i = static_cast<std::size_t>(r * cols + c);
      const float s = out.grid->scale_at(r, c), z = out.grid->zero_at(r, c);
      const float qv = quantize_value(weight[i], s, z, args);
      out.weight[i] = dequantize_value(qv, s, z);
      out.q[i] = qv;
    }
  return out;
}

double
relative_output_error(std::span<const float> weight, std::span<const float> recon, std::int64_t rows, std::int64_t cols,
                      std::span<const float> h) {
  std::vector<float> e(weight.size());
  for (std::size_t i = 0; i < e.size(); ++i)
    e[i] = weight[i] - recon[i];
  auto quadratic = [&](std::span<const float> m) {
    std::vector<float> mh(m.size());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(cols),
                static_cast<int>(cols), 1.0f, m.data(), static_cast<int>(cols), h.data(), static_cast<int>(cols), 0.0f,
                mh.data(), static_cast<int>(cols));
    double total = 0;
    for (std::size_t i = 0; i < m.size(); ++i)
      total += static_cast<double>(m[i]) * static_cast<double>(mh[i]);
    return total;
  };
  const double denom = quadratic(weight);
  return denom > 0 ? quadratic(e) / denom : 0.0;
}

} // namespace optkit::quant
