// The standard normal's tails in log space and the truncated normal TPE's kernels are: masses of
// [a, b] that stay accurate far into either tail (scipy's log_gauss_mass approach: mirror
// right-tail intervals into the left tail, where Φ has no cancellation), inverse-CDF sampling,
// and the log density.
#pragma once

namespace optkit::tune {

double log_ndtr(double x);                 // log Φ(x), finite down to x ≈ −1e150
double log_gauss_mass(double a, double b); // log(Φ(b) − Φ(a)), a < b
double ndtri(double p);                    // Φ⁻¹(p), p in (0, 1)

// A draw of N(loc, scale²) truncated to [low, high], from u in [0, 1).
double truncnorm_from_uniform(double u, double low, double high, double loc, double scale);
// log density of that distribution at x (−inf outside [low, high]).
double truncnorm_logpdf(double x, double low, double high, double loc, double scale);

} // namespace optkit::tune
