#include "tune/truncated_normal.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

namespace optkit::tune {

namespace {

const double sqrt2 = std::numbers::sqrt2;
const double log_sqrt_2pi = 0.5 * std::log(2.0 * std::numbers::pi);

double
ndtr(double x) {
  return 0.5 * std::erfc(-x / sqrt2);
}

// log(e^big − e^small), big ≥ small.
double
log_diff(double big, double small) {
  if (small == -std::numeric_limits<double>::infinity())
    return big;
  return big + std::log1p(-std::exp(small - big));
}

double
standard_from_uniform(double u, double a, double b) {
  if (a > 0) // mirror the right tail into the left one, where Φ keeps its precision
    return -standard_from_uniform(1.0 - u, -b, -a);
  const double pa = ndtr(a), pb = ndtr(b);
  const double p = std::clamp(pa + u * (pb - pa), std::numeric_limits<double>::min(), 1.0 - 1e-16);
  return std::clamp(ndtri(p), a, b);
}

} // namespace

double
log_ndtr(double x) {
  if (x > 6)
    return std::log1p(-0.5 * std::erfc(x / sqrt2));
  if (x > -20)
    return std::log(ndtr(x));
  // Mills-ratio series: Φ(x) ≈ φ(x)/(−x) · (1 − 1/x² + 3/x⁴ − 15/x⁶).
  const double x2 = x * x;
  return -0.5 * x2 - log_sqrt_2pi - std::log(-x) + std::log1p(-1 / x2 + 3 / (x2 * x2) - 15 / (x2 * x2 * x2));
}

double
log_gauss_mass(double a, double b) {
  if (b <= 0)
    return log_diff(log_ndtr(b), log_ndtr(a));
  if (a > 0)
    return log_gauss_mass(-b, -a);
  return std::log1p(-ndtr(a) - ndtr(-b)); // a ≤ 0 < b: the mass minus both tails
}

double
ndtri(double p) {
  // Acklam's rational approximation (relative error 1.15e-9), then one Halley step on erfc.
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  if (p <= 0)
    return -std::numeric_limits<double>::infinity();
  if (p >= 1)
    return std::numeric_limits<double>::infinity();
  double x;
  if (p < 0.02425) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p > 1 - 0.02425) {
    const double q = std::sqrt(-2 * std::log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  const double e = ndtr(x) - p;
  const double u = e * std::sqrt(2 * std::numbers::pi) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

double
truncnorm_from_uniform(double u, double low, double high, double loc, double scale) {
  const double z = standard_from_uniform(u, (low - loc) / scale, (high - loc) / scale);
  return std::clamp(loc + scale * z, low, high);
}

double
truncnorm_logpdf(double x, double low, double high, double loc, double scale) {
  if (x < low || x > high)
    return -std::numeric_limits<double>::infinity();
  const double z = (x - loc) / scale;
  return -0.5 * z * z - log_sqrt_2pi - std::log(scale) - log_gauss_mass((low - loc) / scale, (high - loc) / scale);
}

} // namespace optkit::tune
