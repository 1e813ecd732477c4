#include "bench/arrivals.hpp"

#include "core/error.hpp"
#include "core/random_source.hpp"

#include <algorithm>
#include <cmath>

namespace optkit::bench {

ArrivalProcess
parse_arrival_process(const std::string& text) {
  if (text == "poisson")
    return ArrivalProcess::poisson;
  if (text == "gamma")
    return ArrivalProcess::gamma;
  if (text == "constant")
    return ArrivalProcess::constant;
  throw InputError("arrival process '" + text + "' is not poisson, gamma or constant");
}

std::string
to_string(ArrivalProcess process) {
  switch (process) {
  case ArrivalProcess::poisson:
    return "poisson";
  case ArrivalProcess::gamma:
    return "gamma";
  case ArrivalProcess::constant:
    return "constant";
  }
  return "?";
}

std::vector<double>
arrival_offsets(const ArrivalOptions& options, std::size_t count) {
  if (!(options.rate > 0) || !std::isfinite(options.rate))
    throw InputError("arrival rate must be a positive number of requests per second");
  if (!(options.burstiness > 0))
    throw InputError("burstiness must be positive");
  std::vector<double> offsets(count);
  if (count == 0)
    return offsets;
  if (options.process == ArrivalProcess::constant) {
    for (std::size_t i = 0; i < count; ++i)
      offsets[i] = static_cast<double>(i) / options.rate;
    return offsets;
  }
  RandomSource random(options.seed);
  const double shape = options.process == ArrivalProcess::poisson ? 1.0 : options.burstiness;
  // Request i leaves after i + 1 gaps (the first also waits one), as vLLM's schedule does.
  double t = 0;
  for (std::size_t i = 0; i < count; ++i) {
    t += shape == 1.0 ? random.exponential(1.0) : random.gamma(shape) / shape;
    offsets[i] = t;
  }
  const double scale = (static_cast<double>(count) / options.rate) / offsets.back();
  for (auto& offset : offsets)
    offset *= scale;
  return offsets;
}

std::vector<double>
replay_offsets(std::vector<double> timestamps, double time_scale) {
  if (!(time_scale > 0))
    throw InputError("trace time scale must be positive");
  std::sort(timestamps.begin(), timestamps.end());
  const double origin = timestamps.empty() ? 0.0 : timestamps.front();
  for (auto& t : timestamps)
    t = (t - origin) / time_scale;
  return timestamps;
}

} // namespace optkit::bench
