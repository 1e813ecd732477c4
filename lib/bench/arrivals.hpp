// When each request of an open-loop trial is meant to leave: Poisson, gamma with burstiness (as
// vLLM's --burstiness), constant spacing, or a trace's timestamps scaled in time. Offsets are
// seconds from the trial's start; Poisson and gamma schedules are rescaled so the last arrival
// falls exactly at count/rate, as vLLM does, so a trial's arrival rate is the one asked for
// rather than one seed's draw of it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace optkit::bench {

enum class ArrivalProcess { poisson, gamma, constant };

ArrivalProcess parse_arrival_process(const std::string& text); // InputError naming the value
std::string to_string(ArrivalProcess process);

struct ArrivalOptions {
  ArrivalProcess process = ArrivalProcess::poisson;
  double rate = 1;       // requests per second
  double burstiness = 1; // gamma shape: 1 = Poisson, < 1 burstier, > 1 smoother
  std::uint64_t seed = 0;
};

std::vector<double> arrival_offsets(const ArrivalOptions& options, std::size_t count);

// Trace replay: `timestamps` (any origin, any order) become offsets from the first, divided by
// `time_scale` (2 = twice as fast).
std::vector<double> replay_offsets(std::vector<double> timestamps, double time_scale);

} // namespace optkit::bench
