// The pictures a certification comes with: latency percentiles against the rates probed, with
// the SLO thresholds and the certified rate marked; and for one trial OptiKit's Figure 4 —
// arrival against completion time, the fitted line r = α + β·c and the identity — its latency
// CDFs and its timeline of requests in flight.
#pragma once

#include "bench/certification.hpp"

#include <string>

namespace optkit::bench {

std::string latency_vs_rate_svg(const Certification& certification, const std::vector<SloRule>& slos);
std::string steady_state_svg(const TrialResult& trial);
// The trial the per-trial pictures show: the certified one, else the last failing open-loop one
// (null when there is none: a gate that failed, a closed-loop run).
const TrialResult* shown_trial(const Certification& certification);
// The measured requests' TTFT and e2e as empirical CDFs (ms), with the SLO thresholds.
std::string latency_cdf_svg(const TrialResult& trial, const std::vector<SloRule>& slos);
// Requests sent, completed and in flight over the trial's time.
std::string timeline_svg(const TrialResult& trial);

} // namespace optkit::bench
