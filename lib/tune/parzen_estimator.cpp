#include "tune/parzen_estimator.hpp"

#include "tune/truncated_normal.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace optkit::tune {

std::vector<double>
default_weights(std::size_t n) {
  if (n < 25)
    return std::vector<double>(n, 1.0);
  std::vector<double> w;
  w.reserve(n);
  const std::size_t ramp = n - 25;
  const double first = 1.0 / static_cast<double>(n);
  for (std::size_t i = 0; i < ramp; ++i) // numpy.linspace(1/n, 1, ramp)
    w.push_back(ramp == 1 ? first : first + (1.0 - first) * static_cast<double>(i) / static_cast<double>(ramp - 1));
  w.insert(w.end(), 25, 1.0);
  return w;
}

ParzenEstimator::ParzenEstimator(const Parameter& parameter, std::span<const double> observations,
                                 const ParzenOptions& options)
    : m_parameter(parameter) {
  const std::size_t n = observations.size();
  m_weights = default_weights(n);
  m_weights.push_back(options.prior_weight);
  const double total = std::accumulate(m_weights.begin(), m_weights.end(), 0.0);
  for (auto& w : m_weights)
    w /= total;

  if (parameter.kind == ParamKind::categorical) {
    const std::size_t choices = parameter.choices.size();
    m_categorical.assign(n + 1, std::vector<double>(choices, options.prior_weight / static_cast<double>(n + 1)));
    for (std::size_t i = 0; i < n; ++i)
      m_categorical[i][static_cast<std::size_t>(std::llround(observations[i]))] += 1.0;
    for (auto& row : m_categorical) {
      const double sum = std::accumulate(row.begin(), row.end(), 0.0);
      for (auto& v : row)
        v /= sum;
    }
    return;
  }

  const bool integer = parameter.kind == ParamKind::integer;
  if (parameter.log) {
    m_low = std::log(integer ? parameter.low - 0.5 : parameter.low);
    m_high = std::log(integer ? parameter.high + 0.5 : parameter.high);
  } else if (parameter.stepped()) {
    m_q = parameter.grid_step();
    m_low = parameter.low - 0.5 * m_q;
    m_high = parameter.high + 0.5 * m_q;
  } else {
    m_low = parameter.low;
    m_high = parameter.high;
  }
  const double range = m_high - m_low;
  for (double x : observations)
    m_mus.push_back(to_model(x));
  m_mus.push_back(0.5 * (m_low + m_high)); // the prior

  // Bandwidths from the neighbours of each centre, the prior's included.
  std::vector<std::size_t> order(m_mus.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return m_mus[a] < m_mus[b]; });
  std::vector<double> padded;
  padded.push_back(m_low);
  for (auto i : order)
    padded.push_back(m_mus[i]);
  padded.push_back(m_high);
  std::vector<double> sorted_sigmas(order.size());
  for (std::size_t j = 0; j < order.size(); ++j)
    sorted_sigmas[j] = std::max(padded[j + 1] - padded[j], padded[j + 2] - padded[j + 1]);
  if (!options.endpoints && padded.size() >= 4) {
    sorted_sigmas.front() = padded[2] - padded[1];
    sorted_sigmas[sorted_sigmas.size() - 1] = padded[padded.size() - 2] - padded[padded.size() - 3];
  }
  m_sigmas.assign(m_mus.size(), 0.0);
  for (std::size_t j = 0; j < order.size(); ++j)
    m_sigmas[order[j]] = sorted_sigmas[j];
  const double max_sigma = range;
  const double min_sigma =
      options.magic_clip ? range / std::min(100.0, 1.0 + static_cast<double>(m_mus.size())) : 1e-12;
  for (auto& s : m_sigmas)
    s = std::clamp(s, min_sigma, max_sigma);
  m_sigmas.back() = range; // the prior keeps σ = the range
}

double
ParzenEstimator::to_model(double internal) const {
  return m_parameter.log ? std::log(internal) : internal;
}

double
ParzenEstimator::from_model(double modelled) const {
  const auto& p = m_parameter;
  double x = modelled;
  if (p.log) {
    x = std::exp(modelled);
    if (p.kind == ParamKind::integer)
      x = std::round(x);
  } else if (m_q > 0) {
    x = std::round((x - p.low) / m_q) * m_q + p.low;
  }
  return std::clamp(x, p.low, p.high);
}

std::vector<double>
ParzenEstimator::sample(RandomSource& random, std::size_t count) const {
  std::vector<double> cumulative(m_weights.size());
  std::partial_sum(m_weights.begin(), m_weights.end(), cumulative.begin());
  const auto component = [&] {
    const double u = random.uniform() * cumulative.back();
    const auto it = std::upper_bound(cumulative.begin(), cumulative.end(), u);
    return std::min<std::size_t>(static_cast<std::size_t>(it - cumulative.begin()), m_weights.size() - 1);
  };
  std::vector<double> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t k = component();
    if (!m_categorical.empty()) {
      const auto& row = m_categorical[k];
      double u = random.uniform();
      std::size_t c = 0;
      for (; c + 1 < row.size(); ++c) {
        if (u < row[c])
          break;
        u -= row[c];
      }
      out.push_back(static_cast<double>(c));
      continue;
    }
    out.push_back(from_model(truncnorm_from_uniform(random.uniform(), m_low, m_high, m_mus[k], m_sigmas[k])));
  }
  return out;
}

double
ParzenEstimator::log_pdf(double internal) const {
  std::vector<double> terms(m_weights.size());
  for (std::size_t k = 0; k < m_weights.size(); ++k) {
    double log_kernel;
    if (!m_categorical.empty()) {
      log_kernel = std::log(m_categorical[k][static_cast<std::size_t>(std::llround(internal))]);
    } else if (m_q > 0) {
      const double x = internal;
      const double lo = std::max(x - m_q / 2, m_low), hi = std::min(x + m_q / 2, m_high);
      const double s = m_sigmas[k], mu = m_mus[k];
      log_kernel = log_gauss_mass((lo - mu) / s, (hi - mu) / s) - log_gauss_mass((m_low - mu) / s, (m_high - mu) / s);
    } else {
      log_kernel = truncnorm_logpdf(to_model(internal), m_low, m_high, m_mus[k], m_sigmas[k]);
    }
    terms[k] = log_kernel + std::log(m_weights[k]);
  }
  const double top = *std::max_element(terms.begin(), terms.end());
  if (top == -std::numeric_limits<double>::infinity())
    return top;
  double sum = 0;
  for (double t : terms)
    sum += std::exp(t - top);
  return top + std::log(sum);
}

} // namespace optkit::tune
