#include "quant/awq.hpp"

#include "core/error.hpp"
#include "quant/gptq.hpp"
#include "quant/smoothquant.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace optkit::quant {

namespace {

// w̄: per input channel, the mean over every balance layer's rows of |w| / (its group's max|w|).
std::vector<double>
normalised_weight_means(const std::vector<std::span<const float>>& weights, std::int64_t cols,
                        std::int64_t group_size) {
  std::vector<double> sum(static_cast<std::size_t>(cols), 0.0);
  std::int64_t rows = 0;
  for (const auto& w : weights) {
    const auto n = static_cast<std::int64_t>(w.size()) / cols;
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t g = 0; g < cols; g += group_size) {
        const auto end = std::min(cols, g + group_size);
        float top = 0.0f;
        for (std::int64_t c = g; c < end; ++c)
          top = std::max(top, std::fabs(w[static_cast<std::size_t>(r * cols + c)]));
        if (top > 0.0f)
          for (std::int64_t c = g; c < end; ++c)
            sum[static_cast<std::size_t>(c)] +=
                static_cast<double>(std::fabs(w[static_cast<std::size_t>(r * cols + c)]) / top);
      }
    rows += n;
  }
  for (auto& v : sum)
    v /= static_cast<double>(std::max<std::int64_t>(rows, 1));
  return sum;
}

// The factors of ratio r: x̄^r (/ (w̄^(1−r) + 1e−4) with duo scaling), clamped ≥ 1e−4 and divided
// by √(max · min).
std::vector<float>
candidate_scales(std::span<const float> x_mean, const std::vector<double>& w_mean, double ratio, bool duo) {
  std::vector<double> s(x_mean.size());
  for (std::size_t c = 0; c < s.size(); ++c) {
    double v = std::pow(static_cast<double>(x_mean[c]), ratio);
    if (duo)
      v /= std::pow(w_mean[c], 1.0 - ratio) + 1e-4;
    s[c] = std::max(v, 1e-4);
  }
  const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
  const double norm = std::sqrt(*lo * *hi);
  std::vector<float> out(s.size());
  for (std::size_t c = 0; c < s.size(); ++c)
    out[c] = static_cast<float>(s[c] / norm);
  return out;
}

} // namespace

std::vector<AwqCandidate>
awq_candidates(std::span<const float> input_mean_abs, const std::vector<std::span<const float>>& weights,
               std::int64_t cols, std::int64_t group_size, const AwqOptions& options) {
  if (static_cast<std::int64_t>(input_mean_abs.size()) != cols || options.grid < 2)
    throw InputError("AWQ: one activation statistic per input channel and a grid of at least 2 are needed");
  const auto w_mean = normalised_weight_means(weights, cols, group_size);
  std::vector<std::pair<double, bool>> ratios;
  if (options.duo_scaling) {
    ratios.emplace_back(0.0, false);
    for (int k = 0; k <= options.grid - 2; ++k)
      ratios.emplace_back(static_cast<double>(k) / (options.grid - 2), true);
  } else {
    for (int k = 0; k < options.grid; ++k)
      ratios.emplace_back(static_cast<double>(k) / (options.grid - 1), false);
  }
  std::vector<AwqCandidate> out;
  for (const auto& [ratio, duo] : ratios)
    out.push_back({ratio, duo, candidate_scales(input_mean_abs, w_mean, ratio, duo)});
  return out;
}

std::vector<float>
awq_fake_quantized(std::span<const float> weight, std::int64_t rows, std::int64_t cols, std::span<const float> s,
                   const QuantArgs& args, model::DType scale_dtype) {
  std::vector<float> scaled(weight.begin(), weight.end());
  scale_columns(scaled, cols, s);
  auto q = rtn(scaled, rows, cols, args, scale_dtype).weight;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      q[static_cast<std::size_t>(r * cols + c)] /= s[static_cast<std::size_t>(c)];
  return q;
}

double
awq_linear_error(const std::vector<std::span<const float>>& weights, std::int64_t cols, std::span<const float> s,
                 std::span<const float> hessian, const QuantArgs& args, model::DType scale_dtype) {
  double error = 0;
  for (const auto& w : weights) {
    const auto rows = static_cast<std::int64_t>(w.size()) / cols;
    error += output_error_terms(w, awq_fake_quantized(w, rows, cols, s, args, scale_dtype), rows, cols, hessian).error;
  }
  return error;
}

AwqSearch
search_awq(std::vector<AwqCandidate> candidates, const std::function<double(const AwqCandidate&)>& error_of) {
  AwqSearch out;
  out.error = std::numeric_limits<double>::infinity();
  for (auto& candidate : candidates) {
    const double error = error_of(candidate);
    if (candidate.ratio == 0.0 && !candidate.duo)
      out.identity_error = error;
    if (error < out.error) {
      out.error = error;
      out.best = std::move(candidate);
    }
  }
  return out;
}

} // namespace optkit::quant
