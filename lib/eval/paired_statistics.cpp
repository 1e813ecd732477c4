#include "eval/paired_statistics.hpp"

#include "core/error.hpp"
#include "core/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace optkit::eval {

namespace {

double
mean_of(std::span<const double> v) {
  double sum = 0;
  for (const double x : v)
    sum += x;
  return v.empty() ? std::numeric_limits<double>::quiet_NaN() : sum / static_cast<double>(v.size());
}

bool
all_binary(std::span<const double> v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return x == 0.0 || x == 1.0; });
}

// P(X ≤ k) for X ~ Binomial(n, ½), summed in log space so large n does not underflow.
double
binomial_half_cdf(std::int64_t k, std::int64_t n) {
  double total = 0;
  for (std::int64_t i = 0; i <= k; ++i)
    total += std::exp(std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(i) + 1) -
                      std::lgamma(static_cast<double>(n - i) + 1) - static_cast<double>(n) * std::log(2.0));
  return total;
}

} // namespace

double
mean_stderr(std::span<const double> scores) {
  if (scores.size() < 2)
    return 0;
  return summarize(scores).stddev / std::sqrt(static_cast<double>(scores.size()));
}

double
pooled_stderr(std::span<const double> stderrs, std::span<const std::size_t> sizes) {
  double weighted = 0, total = 0;
  for (std::size_t i = 0; i < stderrs.size() && i < sizes.size(); ++i) {
    const auto n = static_cast<double>(sizes[i]);
    weighted += (n - 1) * n * stderrs[i] * stderrs[i];
    total += n;
  }
  const double dof = total - static_cast<double>(std::min(stderrs.size(), sizes.size()));
  return dof > 0 ? std::sqrt(weighted / dof / total) : std::nan("");
}

McNemar
exact_mcnemar(std::span<const double> baseline, std::span<const double> candidate) {
  if (baseline.size() != candidate.size())
    throw InputError("paired comparison: the runs scored different numbers of items");
  McNemar m;
  for (std::size_t i = 0; i < baseline.size(); ++i) {
    const bool b = baseline[i] >= 0.5, c = candidate[i] >= 0.5;
    m.baseline_only += (b && !c) ? 1 : 0;
    m.candidate_only += (!b && c) ? 1 : 0;
  }
  const std::int64_t n = m.baseline_only + m.candidate_only;
  m.p_value = n == 0 ? 1.0 : std::min(1.0, 2.0 * binomial_half_cdf(std::min(m.baseline_only, m.candidate_only), n));
  return m;
}

PairedComparison
compare_paired(std::span<const double> baseline, std::span<const double> candidate, const BootstrapOptions& options) {
  if (baseline.size() != candidate.size())
    throw InputError("paired comparison: the runs scored different numbers of items");
  if (baseline.empty())
    throw InputError("paired comparison: no items");
  PairedComparison r;
  r.baseline_mean = mean_of(baseline);
  r.candidate_mean = mean_of(candidate);
  r.difference = r.candidate_mean - r.baseline_mean;
  r.recovery = r.baseline_mean != 0 ? r.candidate_mean / r.baseline_mean : std::numeric_limits<double>::quiet_NaN();
  r.binary = all_binary(baseline) && all_binary(candidate);

  const std::size_t n = baseline.size();
  std::mt19937_64 engine(options.seed);
  std::uniform_int_distribution<std::size_t> pick(0, n - 1);
  std::vector<double> recoveries, differences;
  recoveries.reserve(static_cast<std::size_t>(options.resamples));
  differences.reserve(static_cast<std::size_t>(options.resamples));
  for (int b = 0; b < options.resamples; ++b) {
    double sb = 0, sc = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const auto j = pick(engine);
      sb += baseline[j];
      sc += candidate[j];
    }
    differences.push_back((sc - sb) / static_cast<double>(n));
    if (sb != 0)
      recoveries.push_back(sc / sb);
  }
  const double alpha = 1 - options.confidence;
  if (!recoveries.empty()) {
    std::sort(recoveries.begin(), recoveries.end());
    r.recovery_low = percentile_of_sorted(recoveries, 100 * alpha / 2);
    r.recovery_high = percentile_of_sorted(recoveries, 100 * (1 - alpha / 2));
  } else {
    r.recovery_low = r.recovery_high = std::numeric_limits<double>::quiet_NaN();
  }
  if (r.binary) {
    r.mcnemar = exact_mcnemar(baseline, candidate);
    r.p_value = r.mcnemar.p_value;
  } else {
    // Paired bootstrap, two-sided: how often the resampled difference falls on the far side of 0.
    std::size_t at_or_below = 0, at_or_above = 0;
    for (const double d : differences) {
      at_or_below += d <= 0 ? 1u : 0u;
      at_or_above += d >= 0 ? 1u : 0u;
    }
    const double m = static_cast<double>(differences.size());
    r.p_value = std::min(1.0, 2.0 * static_cast<double>(std::min(at_or_below, at_or_above)) / m);
    if (r.difference == 0)
      r.p_value = 1;
  }
  return r;
}

std::vector<double>
holm_adjust(const std::vector<double>& p_values) {
  const std::size_t m = p_values.size();
  std::vector<std::size_t> order(m);
  for (std::size_t i = 0; i < m; ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p_values[a] < p_values[b]; });
  std::vector<double> adjusted(m);
  double running = 0;
  for (std::size_t k = 0; k < m; ++k) {
    running = std::max(running, std::min(1.0, static_cast<double>(m - k) * p_values[order[k]]));
    adjusted[order[k]] = running;
  }
  return adjusted;
}

TrialSpread
trial_spread(std::span<const double> values) {
  const auto s = summarize(values);
  TrialSpread t;
  t.trials = s.count;
  t.mean = s.mean;
  t.stddev = s.stddev;
  t.rsd = s.mean != 0 ? s.stddev / std::abs(s.mean) : std::numeric_limits<double>::quiet_NaN();
  return t;
}

} // namespace optkit::eval
