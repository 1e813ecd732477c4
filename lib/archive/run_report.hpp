// Presenting archived runs: listing tables, a run's full detail as JSON or text, flat metric
// rows for CSV, and a side-by-side comparison of two runs.
#pragma once

#include "archive/records.hpp"
#include "core/table.hpp"

#include <map>
#include <string>
#include <vector>

namespace optkit::archive {

Table runs_table(const std::vector<RunRecord>& runs);

nlohmann::json run_json(const RunRecord& run);
nlohmann::json run_detail_json(const RunDetail& detail);
std::string run_detail_text(const RunDetail& detail, bool color);

// One row per metric, with the trial index and attempt it belongs to (blank for run-level).
Table metrics_table(const RunDetail& detail);

struct MetricSummary {
  std::string unit;
  std::size_t count = 0;
  double mean = 0;
  double stddev = 0; // sample standard deviation, 0 for a single value
};

// Mean and spread of each metric name over the run's finite values.
std::map<std::string, MetricSummary> summarize_metrics(const RunDetail& detail);

// Rows: every config key whose value differs, then every metric of either run with both means,
// the difference and the relative change.
Table compare_runs(const RunDetail& a, const RunDetail& b);

} // namespace optkit::archive
