// bench's report for people (`bench --html FILE`): one self-contained HTML page, charts inline as
// SVG, nothing fetched from anywhere — the certification's summary, latency against the rates
// probed with the SLOs and the certified rate, every trial's figures (the wait before it, why it
// failed), and for the certified trial (else the last failing one) its steady-state regression,
// its TTFT and e2e CDFs and its timeline of requests in flight. `--format json` stays the
// machine interface.
#pragma once

#include "bench/bench_run.hpp"

#include <string>

namespace optkit::bench {

std::string bench_report_html(const BenchResult& result);

} // namespace optkit::bench
