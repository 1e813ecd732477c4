#include "bench/bench_plots.hpp"

#include "core/svg_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace optkit::bench {

std::string
latency_vs_rate_svg(const Certification& c, const std::vector<SloRule>& slos) {
  static const char* colours[] = {"#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"};
  Chart chart;
  chart.title = "Latency vs request rate (open-loop trials)";
  chart.x_label = "request rate (req/s)";
  chart.y_label = "latency (ms)";
  // One series per SLO statistic, or e2e p95 and ttft p95 when no SLO was given.
  std::vector<std::pair<LatencyMetric, double>> shown;
  for (const auto& rule : slos)
    shown.emplace_back(rule.metric, rule.percentile);
  if (shown.empty())
    shown = {{LatencyMetric::e2e, 95}, {LatencyMetric::ttft, 95}};
  std::size_t colour = 0;
  for (const auto& [metric, q] : shown) {
    ChartSeries series;
    series.label = to_string(metric) + (q < 0 ? " mean" : fmt::format(" p{}", q));
    series.colour = colours[colour++ % std::size(colours)];
    std::vector<std::pair<double, double>> points;
    for (const auto& t : c.trials)
      if (t.phase != "gate") {
        const double value = t.summary.latency(metric).statistic(q);
        if (value >= 0)
          points.emplace_back(t.rate, value * 1e3);
      }
    std::sort(points.begin(), points.end());
    series.points = std::move(points);
    chart.series.push_back(std::move(series));
  }
  for (const auto& rule : slos)
    chart.horizontal.push_back({rule.threshold_s * 1e3, "SLO " + rule.text, "#c00"});
  if (c.certified_rate > 0)
    chart.vertical.push_back({c.certified_rate, fmt::format("certified {:.4g} req/s", c.certified_rate), "#2a2"});
  if (c.lowest_failing > 0)
    chart.vertical.push_back({c.lowest_failing, fmt::format("failed {:.4g}", c.lowest_failing), "#c00"});
  return render_svg(chart);
}

std::string
steady_state_svg(const TrialResult& trial) {
  const auto& s = trial.summary;
  Chart chart;
  chart.title =
      fmt::format("Steady state at {:.4g} req/s: beta = {:.3f}, alpha = {:.2f} s, r = {:.3f} ({})", trial.rate,
                  s.steady.beta, s.steady.alpha, s.steady.r, s.steady.stable ? "steady" : "not steady");
  chart.x_label = "completion time c (s from trial start)";
  chart.y_label = "arrival time r (s from trial start)";
  ChartSeries points;
  points.label = "requests (measured)";
  points.colour = s.steady.stable ? "#2a2" : "#c00";
  points.line = false;
  double max_c = 0;
  for (const auto& r : trial.recording.requests)
    if (r.ok() && r.intended >= s.window_start && r.intended <= s.window_end) {
      points.points.emplace_back(r.end, r.intended);
      max_c = std::max(max_c, r.end);
    }
  const double min_c =
      points.points.empty() ? 0.0 : std::min_element(points.points.begin(), points.points.end())->first;
  ChartSeries fit;
  fit.label = fmt::format("r = {:.2f} + {:.3f} c", s.steady.alpha, s.steady.beta);
  fit.colour = "#333";
  fit.markers = false;
  fit.points = {{min_c, s.steady.alpha + s.steady.beta * min_c}, {max_c, s.steady.alpha + s.steady.beta * max_c}};
  ChartSeries identity;
  identity.label = "slope 1";
  identity.colour = "#999";
  identity.markers = false;
  identity.dashed = true;
  identity.points = {{min_c, min_c + s.steady.alpha + (s.steady.beta - 1) * min_c},
                     {max_c, max_c + s.steady.alpha + (s.steady.beta - 1) * min_c}};
  chart.series = {std::move(points), std::move(fit), std::move(identity)};
  return render_svg(chart);
}

} // namespace optkit::bench
