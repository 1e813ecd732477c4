// A predicted latency and where it came from. Every figure the planner prints carries the set of
// sources behind it, from a measurement taken verbatim to a pure speed-of-light guess.
#pragma once

#include <cstdint>
#include <string>

namespace optkit::perf {

enum SourceLabel : std::uint8_t {
  measured = 1,     // a point of the perf database, returned verbatim
  interpolated = 2, // between measured points, in utilization space
  extrapolated = 4, // beyond the data: speed of light divided by the nearest measured utilization
  roofline = 8,     // no data for this operator: speed of light divided by default efficiencies
  calibrated = 16,  // no data: speed of light divided by efficiencies fitted to published measurements
};

struct Estimate {
  double us = 0;
  std::uint8_t sources = 0;

  Estimate& operator+=(const Estimate& other) {
    us += other.us;
    sources |= other.sources;
    return *this;
  }
  Estimate scaled(double factor) const { return {us * factor, sources}; }
};

// "measured+interpolated", in the order of the enum; "none" for an empty set.
std::string source_names(std::uint8_t sources);

} // namespace optkit::perf
