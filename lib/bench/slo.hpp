// Service-level objectives as users write them on the command line: `ttft:p95<=500ms`,
// `tpot:p50<=10ms`, `e2e:p99<2s+5%` (the optional +N% is Algorithm 1's error margin: the rule
// still passes when the measured value exceeds the threshold by at most that fraction).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace optkit::bench {

// The per-request latencies a rule can bound (the metric dictionary in man/optkit-bench.1).
enum class LatencyMetric { ttft, tpot, itl, e2e };

std::string to_string(LatencyMetric metric);

struct SloRule {
  LatencyMetric metric = LatencyMetric::e2e;
  double percentile = 95; // 0-100; "mean" is written as percentile -1
  double threshold_s = 0; // seconds
  bool strict = false;    // '<' rather than '<='
  double margin = 0;      // fraction, from "+5%"
  std::string text;       // as written

  bool is_mean() const { return percentile < 0; }
  // Whether `value_s` (the rule's statistic, in seconds) satisfies the rule with its margin.
  bool passes(double value_s) const;
  // "p95" or "mean".
  std::string statistic_name() const;
};

// Throws InputError naming the text and the accepted form.
SloRule parse_slo(const std::string& text);
std::vector<SloRule> parse_slos(const std::vector<std::string>& texts);

// "500ms", "2s", "1.5s", "800us", "250" (milliseconds) → seconds; nullopt when not a duration.
std::optional<double> parse_duration_seconds(const std::string& text);

} // namespace optkit::bench
