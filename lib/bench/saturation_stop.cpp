#include "bench/saturation_stop.hpp"

#include <fmt/format.h>

#include <cmath>

namespace optkit::bench {

MeasurementWindow
measurement_window(std::span<const double> offsets, double warmup_fraction, double cooldown_fraction,
                   std::span<const double> weights) {
  MeasurementWindow window;
  if (offsets.empty())
    return window;
  const double first = offsets.front(), last = offsets.back(), span = last - first;
  window.start = first + warmup_fraction * span;
  window.end = last - cooldown_fraction * span;
  double planned = 0;
  for (std::size_t i = 0; i < offsets.size(); ++i)
    if (offsets[i] >= window.start && offsets[i] <= window.end)
      planned += weights.empty() ? 1.0 : weights[i];
  window.planned = static_cast<std::size_t>(planned);
  return window;
}

namespace {

// Whether request `r` is certain to exceed `rule`'s threshold `limit` at time `now`.
bool
certain_violation(const SloRule& rule, const RequestProgress& r, double now, double limit) {
  const double reached = rule.metric == LatencyMetric::ttft ? r.first_token : r.end;
  return reached >= 0 ? reached - r.intended > limit : now - r.intended > limit;
}

} // namespace

std::string
slo_already_lost(const std::vector<SloRule>& slos, std::span<const RequestProgress> sent, double now,
                 const MeasurementWindow& window) {
  for (const auto& rule : slos) {
    if (rule.is_mean() || (rule.metric != LatencyMetric::ttft && rule.metric != LatencyMetric::e2e))
      continue;
    const double limit = rule.threshold_s * (1 + rule.margin);
    const auto allowed =
        static_cast<std::size_t>(std::ceil((1 - rule.percentile / 100) * static_cast<double>(window.planned))) + 1;
    std::size_t violations = 0;
    for (const auto& r : sent)
      if (!r.to_be_cancelled && r.intended >= window.start && r.intended <= window.end &&
          certain_violation(rule, r, now, limit))
        ++violations;
    if (violations > allowed)
      return fmt::format("SLO {} lost: {} of the {} measured requests already over {:.0f} ms at {:.1f} s", rule.text,
                         violations, window.planned, limit * 1e3, now);
  }
  return {};
}

} // namespace optkit::bench
