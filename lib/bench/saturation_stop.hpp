// The over-saturation stop: an open-loop trial ends early once it can no longer pass. For each
// percentile SLO on TTFT or e2e, a measured request (one whose scheduled time falls in the
// trial's measurement window) that finished over the rule's threshold, or is still waiting for
// what the rule times past it, is a certain violation; once they outnumber what the percentile
// allows of the window's planned requests (with one to spare for the percentile's
// interpolation), no later request can rescue the trial. An overloaded server would otherwise
// hold a trial for its whole schedule and then for the backlog, and leave that backlog to the
// next trial.
#pragma once

#include "bench/slo.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace optkit::bench {

// A sent request as the pacer sees it mid-trial (seconds from the trial's start; -1: not yet).
struct RequestProgress {
  double intended = 0;
  double first_token = -1;
  double end = -1;
  bool to_be_cancelled = false; // the profile has the client abandon it: never counted
};

// The requests of a trial whose scheduled times fall in [start, end]: `planned` of them.
struct MeasurementWindow {
  double start = 0, end = 0;
  std::size_t planned = 0;
};
// The window summarize_trial will measure for `offsets` (trial_summary.hpp's warmup and cooldown).
// With `weights`, the offset i stands for weights[i] requests (a conversation's start, its turns).
MeasurementWindow measurement_window(std::span<const double> offsets, double warmup_fraction, double cooldown_fraction,
                                     std::span<const double> weights = {});

// Why the trial can no longer pass (naming the rule and the count), or empty.
std::string slo_already_lost(const std::vector<SloRule>& slos, std::span<const RequestProgress> sent, double now,
                             const MeasurementWindow& window);

} // namespace optkit::bench
