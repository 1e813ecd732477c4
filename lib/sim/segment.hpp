// One measurement segment on the simulator, as SLO-Tuner runs them: a workload (Poisson or
// bursty on/off arrivals, or closed-loop clients; log-normal prompt and output lengths) served
// until both a minimum duration and a minimum number of measured completions are reached, the
// warmup discarded, then p50/p95/p99 of end-to-end latency and goodput (seed 002 Eq. 1: requests
// meeting the SLO per second of the measured window).
#pragma once

#include "sim/serving_simulator.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace optkit::sim {

enum class ArrivalKind { poisson, bursty, closed_loop };
std::string to_string(ArrivalKind kind);
ArrivalKind parse_arrivals(const std::string& text); // "poisson" | "bursty" | "closed"

struct SimWorkload {
  ArrivalKind arrivals = ArrivalKind::poisson;
  double rate = 10;                              // mean requests/s (open loop)
  double burst_on_s = 2, burst_off_s = 6;        // bursty: arrivals only in on-periods, at rate·(on+off)/on
  int concurrency = 8;                           // closed loop: clients
  double prompt_mean = 512, prompt_log_sd = 0.5; // log-normal with this mean and log-space s.d.
  double output_mean = 128, output_log_sd = 0.5;
  std::int64_t max_prompt = 8192, max_output = 2048;
};

struct SegmentSpec {
  SimWorkload workload;
  double warmup_s = 10;              // arrivals before this are served but not measured
  double min_duration_s = 60;        // measured window at least this long …
  std::size_t min_completions = 500; // … and at least this many measured requests
  double slo_s = 1.2;                // the p99 end-to-end target goodput counts against
};

struct SegmentMetrics {
  std::size_t measured = 0;
  double window_s = 0;              // span of the measured arrivals
  double p50 = 0, p95 = 0, p99 = 0; // end-to-end latency, s
  double mean_ttft = 0;
  double goodput = 0;    // measured requests with e2e ≤ SLO, per second of the window
  double throughput = 0; // measured requests per second of the window
  double output_tokens_per_s = 0;
  double attainment = 0; // share of measured requests meeting the SLO
};

// Jobs for a segment: open-loop arrivals cover warmup + the longer of the duration and the time
// `min_completions` take at `rate`; closed loop gets enough jobs for the same.
std::vector<SimJob> segment_jobs(const SegmentSpec& spec, std::uint64_t seed);

// Runs the segment and measures it (every request is served to the end, so tails are exact).
SegmentMetrics run_segment(const SimTiming& timing, const SimKnobs& knobs, const SegmentSpec& spec, std::uint64_t seed);

// Metrics of already-served requests whose arrival lies in [window_start, window_end].
SegmentMetrics measure(const std::vector<SimRequest>& requests, double window_start, double window_end, double slo_s);

} // namespace optkit::sim
