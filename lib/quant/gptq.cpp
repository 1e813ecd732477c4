#include "quant/gptq.hpp"

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "quant/inverse_hessian.hpp"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <fmt/format.h>
#include <numeric>

namespace optkit::quant {

namespace {

// Columns by decreasing H diagonal (act-order), ties in column order.
std::vector<std::size_t>
act_order_permutation(const std::vector<float>& diagonal) {
  std::vector<std::size_t> perm(diagonal.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](std::size_t a, std::size_t b) { return diagonal[a] > diagonal[b]; });
  return perm;
}

} // namespace

CompressedMatrix
gptq(std::span<const float> weight, std::int64_t rows, std::int64_t cols, std::span<float> hessian,
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
    gather_columns(w, static_cast<std::size_t>(rows), perm);
  }
  // H's own buffer holds U; H is given back as it was when U goes out of scope, also on a throw.
  InverseHessianFactor U(hessian, perm);
  bool factored = false;
  double damp = o.dampening;
  for (int attempt = 1; attempt <= o.max_damping_attempts; ++attempt, damp *= 10) {
    out.damping_attempts = attempt;
    factored = U.factor(damp);
    if (factored)
      break;
  }
  if (!factored)
    throw RuntimeFailure(fmt::format("{}: the calibration Hessian is not positive definite even with dampening {:g} "
                                     "({} attempts); use more or more varied calibration samples",
                                     o.layer, damp / 10, o.max_damping_attempts));
  out.dampening = damp;

  // The outputs are written in the original column order as each column is visited.
  out.weight.assign(w.size(), 0.0f);
  if (out.grid)
    out.q.assign(w.size(), 0.0f);
  out.kept.assign(o.sparse_2_4 ? w.size() : 0, 1);
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
              const float d = U.diagonal(static_cast<std::size_t>(i + k));
              score[k] = wr[i + k] * wr[i + k] / (d * d);
            }
            int order[4] = {0, 1, 2, 3};
            std::stable_sort(order, order + 4, [&](int a, int b) { return score[a] < score[b]; });
            for (int k = 0; k < 4; ++k)
              pruned[k] = (k == order[0] || k == order[1]);
          }
          const float x = wr[i];
          const float d = U.diagonal(static_cast<std::size_t>(i));
          const auto c = static_cast<std::int64_t>(perm[static_cast<std::size_t>(i)]);
          const auto at = static_cast<std::size_t>(r * cols + c); // the outputs' index
          float rec = x, qv = 0.0f;
          if (o.sparse_2_4 && pruned[(i - i1) % 4]) {
            rec = 0.0f;
            out.kept[at] = 0;
            if (out.grid && out.grid->args.levels == Levels::midtread)
              qv = out.grid->zero_at(r, c); // dequantizes to exactly 0
          } else if (out.grid) {
            const float s = out.grid->scale_at(r, c), z = out.grid->zero_at(r, c);
            qv = quantize_value(x, s, z, out.grid->args);
            rec = dequantize_value(qv, s, z);
          }
          if (!out.q.empty())
            out.q[at] = qv;
          out.weight[at] = rec;
          const float e = (x - rec) / d;
          row_loss[static_cast<std::size_t>(r)] += static_cast<double>(e * e);
          const float* ui = U.row(static_cast<std::size_t>(i));
          for (std::int64_t j = i + 1; j < i2; ++j)
            wr[j] -= e * ui[j];
          er[i - i1] = e;
        }
      }
    });
    if (i2 < cols)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(cols - i2),
                  static_cast<int>(count), -1.0f, err.data(), static_cast<int>(count),
                  U.row(static_cast<std::size_t>(i1)) + i2, static_cast<int>(cols), 1.0f, w.data() + i2,
                  static_cast<int>(cols));
  }
  out.loss = std::accumulate(row_loss.begin(), row_loss.end(), 0.0) / 2.0;
  return out;
}

CompressedMatrix
rtn(std::span<const float> weight, std::int64_t rows, std::int64_t cols, const QuantArgs& args,
    model::DType scale_dtype, std::optional<float> shared_absmax) {
  CompressedMatrix out;
  out.rows = rows;
  out.cols = cols;
  out.grid = compute_grid(weight, rows, cols, args, scale_dtype, shared_absmax);
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

OutputErrorTerms
output_error_terms(std::span<const float> weight, std::span<const float> recon, std::int64_t rows, std::int64_t cols,
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
  const double reference = quadratic(weight);
  return {quadratic(e), reference};
}

double
relative_output_error(std::span<const float> weight, std::span<const float> recon, std::int64_t rows, std::int64_t cols,
                      std::span<const float> h) {
  const auto terms = output_error_terms(weight, recon, rows, cols, h);
  return terms.reference > 0 ? terms.error / terms.reference : 0.0;
}

} // namespace optkit::quant
