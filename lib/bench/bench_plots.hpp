// The two pictures a certification comes with: latency percentiles against the rates probed,
// with the SLO thresholds and the certified rate marked; and the seed's Figure 4 for one trial —
// arrival against completion time, the fitted line r = α + β·c and the identity.
#pragma once

#include "bench/certification.hpp"

#include <string>

namespace optkit::bench {

std::string latency_vs_rate_svg(const Certification& certification, const std::vector<SloRule>& slos);
std::string steady_state_svg(const TrialResult& trial);

} // namespace optkit::bench
