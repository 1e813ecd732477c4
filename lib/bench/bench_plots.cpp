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
      if (t.phase != TrialPhase::gate) {
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

const TrialResult*
shown_trial(const Certification& c) {
  const TrialResult* shown = nullptr;
  for (const auto& t : c.trials)
    if (t.phase != TrialPhase::gate && t.phase != TrialPhase::concurrency && (!t.passed || t.rate == c.certified_rate))
      if (shown == nullptr || !shown->passed || t.passed)
        shown = &t;
  return shown;
}

namespace {

// (value, share of values at or below it) for each sorted value.
std::vector<std::pair<double, double>>
empirical_cdf(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  std::vector<std::pair<double, double>> out;
  for (std::size_t i = 0; i < values.size(); ++i)
    out.emplace_back(values[i], static_cast<double>(i + 1) / static_cast<double>(values.size()));
  return out;
}

} // namespace

std::string
latency_cdf_svg(const TrialResult& trial, const std::vector<SloRule>& slos) {
  const auto& s = trial.summary;
  std::vector<double> ttft, e2e;
  for (const auto& r : trial.recording.requests)
    if (r.ok() && r.intended >= s.window_start && r.intended <= s.window_end) {
      ttft.push_back(r.ttft() * 1e3);
      e2e.push_back(r.e2e() * 1e3);
    }
  Chart chart;
  chart.title = fmt::format("Latency CDFs at {:.4g} req/s ({} measured requests)", trial.rate, e2e.size());
  chart.x_label = "latency (ms)";
  chart.y_label = "share of requests at or below";
  chart.series = {{"ttft", "#1f77b4", empirical_cdf(std::move(ttft)), true, false, false},
                  {"e2e", "#ff7f0e", empirical_cdf(std::move(e2e)), true, false, false}};
  for (const auto& rule : slos)
    if (rule.metric == LatencyMetric::ttft || rule.metric == LatencyMetric::e2e)
      chart.vertical.push_back({rule.threshold_s * 1e3, "SLO " + rule.text, "#c00"});
  for (const auto& rule : slos)
    if (!rule.is_mean() && (rule.metric == LatencyMetric::ttft || rule.metric == LatencyMetric::e2e))
      chart.horizontal.push_back({rule.percentile / 100, fmt::format("p{}", rule.percentile), "#999"});
  return render_svg(chart);
}

std::string
timeline_svg(const TrialResult& trial) {
  // Every send (+1) and end (−1) in time order: the in-flight count steps through them.
  std::vector<std::pair<double, int>> events;
  for (const auto& r : trial.recording.requests) {
    if (r.sent >= 0)
      events.emplace_back(r.sent, +1);
    if (r.sent >= 0 && r.end >= 0)
      events.emplace_back(r.end, -1);
  }
  std::sort(events.begin(), events.end());
  ChartSeries sent{"sent", "#1f77b4", {}, true, false, false};
  ChartSeries done{"completed", "#2ca02c", {}, true, false, false};
  ChartSeries in_flight{"in flight", "#c00", {}, true, false, false};
  int sent_count = 0, done_count = 0;
  for (const auto& [time, step] : events) {
    (step > 0 ? sent_count : done_count) += 1;
    (step > 0 ? sent : done).points.emplace_back(time, step > 0 ? sent_count : done_count);
    in_flight.points.emplace_back(time, sent_count - done_count);
  }
  Chart chart;
  chart.title = fmt::format("Requests over the trial at {:.4g} req/s", trial.rate);
  chart.x_label = "time (s from the trial's start)";
  chart.y_label = "requests";
  chart.series = {std::move(sent), std::move(done), std::move(in_flight)};
  return render_svg(chart);
}

} // namespace optkit::bench
