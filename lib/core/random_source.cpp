#include "core/random_source.hpp"

#include <cmath>
#include <numbers>

namespace optkit {

double
RandomSource::uniform() {
  return static_cast<double>(m_engine() >> 11) * 0x1.0p-53;
}

double
RandomSource::uniform(double low, double high) {
  return low + (high - low) * uniform();
}

double
RandomSource::normal() {
  if (m_has_spare) {
    m_has_spare = false;
    return m_spare;
  }
  const double u1 = 1.0 - uniform(); // (0, 1]
  const double u2 = uniform();
  const double radius = std::sqrt(-2.0 * std::log(u1));
  m_spare = radius * std::sin(2.0 * std::numbers::pi * u2);
  m_has_spare = true;
  return radius * std::cos(2.0 * std::numbers::pi * u2);
}

double
RandomSource::exponential(double rate) {
  return -std::log(1.0 - uniform()) / rate;
}

double
RandomSource::gamma(double shape) {
  if (shape < 1.0) // G(a) = G(a + 1) · U^(1/a)
    return gamma(shape + 1.0) * std::pow(1.0 - uniform(), 1.0 / shape);
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x = 0, v = 0;
    do {
      x = normal();
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = 1.0 - uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v))
      return d * v;
  }
}

std::uint64_t
RandomSource::below(std::uint64_t bound) {
  if (bound <= 1)
    return 0;
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  for (;;) {
    const std::uint64_t value = m_engine();
    if (value < limit)
      return value % bound;
  }
}

} // namespace optkit
