#include "sim/timing_fit.hpp"

#include "core/error.hpp"
#include "core/random_source.hpp"
#include "core/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

namespace optkit::sim {

namespace {

double
median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return percentile_of_sorted(values, 50);
}

// Nelder–Mead on R^n with the standard coefficients (reflection 1, expansion 2, contraction ½,
// shrink ½), stopping after `max_evaluations` or when the simplex's values agree to `tolerance`.
std::vector<double>
nelder_mead(const std::function<double(const std::vector<double>&)>& f, std::vector<double> x0, double step,
            int max_evaluations, double tolerance, int& evaluations) {
  const std::size_t n = x0.size();
  std::vector<std::vector<double>> simplex{x0};
  for (std::size_t i = 0; i < n; ++i) {
    auto x = x0;
    x[i] += step;
    simplex.push_back(x);
  }
  std::vector<double> values;
  for (const auto& x : simplex)
    values.push_back(f(x));
  evaluations = static_cast<int>(simplex.size());
  while (evaluations < max_evaluations) {
    std::vector<std::size_t> order(simplex.size());
    for (std::size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
    const std::size_t best = order.front(), worst = order.back(), second = order[order.size() - 2];
    if (std::abs(values[worst] - values[best]) <= tolerance * (1e-12 + std::abs(values[best])))
      break;
    std::vector<double> centroid(n, 0.0);
    for (std::size_t i : order)
      if (i != worst)
        for (std::size_t d = 0; d < n; ++d)
          centroid[d] += simplex[i][d] / static_cast<double>(n);
    const auto along = [&](double t) {
      std::vector<double> x(n);
      for (std::size_t d = 0; d < n; ++d)
        x[d] = centroid[d] + t * (simplex[worst][d] - centroid[d]);
      return x;
    };
    const auto reflected = along(-1.0);
    const double fr = f(reflected);
    ++evaluations;
    if (fr < values[best]) {
      const auto expanded = along(-2.0);
      const double fe = f(expanded);
      ++evaluations;
      if (fe < fr) {
        simplex[worst] = expanded;
        values[worst] = fe;
      } else {
        simplex[worst] = reflected;
        values[worst] = fr;
      }
    } else if (fr < values[second]) {
      simplex[worst] = reflected;
      values[worst] = fr;
    } else {
      const auto contracted = along(fr < values[worst] ? -0.5 : 0.5);
      const double fc = f(contracted);
      ++evaluations;
      if (fc < std::min(fr, values[worst])) {
        simplex[worst] = contracted;
        values[worst] = fc;
      } else {
        for (std::size_t i : order) {
          if (i == best)
            continue;
          for (std::size_t d = 0; d < n; ++d)
            simplex[i][d] = simplex[best][d] + 0.5 * (simplex[i][d] - simplex[best][d]);
          values[i] = f(simplex[i]);
          ++evaluations;
        }
      }
    }
  }
  const auto at = std::min_element(values.begin(), values.end()) - values.begin();
  return simplex[static_cast<std::size_t>(at)];
}

SimTiming
with_parameters(SimTiming timing, const std::vector<double>& log_params) {
  timing.step_base_s = std::exp(log_params[0]);
  timing.prefill_token_s = std::exp(log_params[1]);
  timing.decode_seq_s = std::exp(log_params[2]);
  timing.noise_cv = 0; // the fit compares medians; noise would only jitter the objective
  return timing;
}

} // namespace

std::array<double, 3>
simulate_trial(const ObservedTrial& trial, const SimTiming& timing, const SimKnobs& knobs, std::uint64_t seed) {
  const std::size_t count = std::clamp<std::size_t>(trial.requests, 20, 2000);
  std::vector<SimJob> jobs(count);
  RandomSource random(seed);
  double t = 0;
  for (auto& job : jobs) {
    job.prompt_tokens = std::max<std::int64_t>(1, std::llround(trial.prompt_tokens));
    job.output_tokens = std::max<std::int64_t>(1, std::llround(trial.output_tokens));
    if (trial.concurrency == 0) {
      t += random.exponential(trial.rate);
      job.arrival = t;
    }
  }
  SimOptions options;
  options.seed = seed;
  const auto served = trial.concurrency > 0 ? run_closed_loop(timing, knobs, jobs, trial.concurrency, options)
                                            : run_open_loop(timing, knobs, jobs, options);
  std::vector<double> ttft, tpot, e2e;
  for (const auto& r : served) {
    ttft.push_back(r.ttft());
    e2e.push_back(r.e2e());
    if (r.output_tokens > 1)
      tpot.push_back((r.end - r.first_token) / static_cast<double>(r.output_tokens - 1));
  }
  return {median_of(ttft), tpot.empty() ? 0.0 : median_of(tpot), median_of(e2e)};
}

TimingFit
fit_timing(const std::vector<ObservedTrial>& trials, const SimKnobs& knobs, const SimTiming& start,
           std::uint64_t seed) {
  std::vector<const ObservedTrial*> usable;
  for (const auto& t : trials)
    if (t.e2e > 0 && t.ttft > 0 && (t.concurrency > 0 || t.rate > 0))
      usable.push_back(&t);
  if (usable.empty())
    throw InputError("no bench trial with latency figures to fit the simulator to");
  std::size_t terms = 0;
  const auto loss = [&](const std::vector<double>& p) {
    const auto timing = with_parameters(start, p);
    double sum = 0;
    terms = 0;
    for (const auto* t : usable) {
      const auto s = simulate_trial(*t, timing, knobs, seed);
      const double measured[] = {t->ttft, t->tpot, t->e2e};
      for (int k = 0; k < 3; ++k) {
        if (measured[k] <= 0 || s[static_cast<std::size_t>(k)] <= 0)
          continue;
        const double d = std::log(s[static_cast<std::size_t>(k)] / measured[k]);
        sum += d * d;
        ++terms;
      }
    }
    return sum;
  };
  const std::vector<double> x0{std::log(std::max(start.step_base_s, 1e-6)),
                               std::log(std::max(start.prefill_token_s, 1e-9)),
                               std::log(std::max(start.decode_seq_s, 1e-8))};
  TimingFit fit;
  const auto best = nelder_mead(loss, x0, 1.0, 600, 1e-6, fit.evaluations);
  fit.timing = with_parameters(start, best);
  fit.timing.noise_cv = start.noise_cv;
  const double sum = loss(best);
  fit.rms_log_error = terms > 0 ? std::sqrt(sum / static_cast<double>(terms)) : 0.0;
  for (const auto& t : trials)
    fit.simulated.push_back(simulate_trial(t, with_parameters(start, best), knobs, seed));
  return fit;
}

} // namespace optkit::sim
