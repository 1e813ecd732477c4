// Measured points of one operator shape over one or two continuous axes (tokens, batch × seq,
// bytes), stored as a utilization of speed of light. A query returns the measurement verbatim on
// an exact hit, blends utilization between the bracketing points inside the data (linear in log
// axis values) and holds the nearest boundary utilization beyond it.
#pragma once

#include "perf/estimate.hpp"

#include <vector>

namespace optkit::perf {

struct GridAnswer {
  double utilization = 0;  // speed-of-light time / real time
  double measured_us = -1; // ≥ 0 on an exact hit
  SourceLabel source = roofline;
};

class UtilizationGrid {
public:
  // `y` is 0 for one-axis grids. A repeated point keeps the last measurement.
  void add(double x, double y, double latency_us, double speed_of_light_us);
  // Sorts the axes; call once after the last add().
  void finish();
  GridAnswer query(double x, double y) const;
  std::size_t points() const { return m_pending.size(); }

private:
  struct Point {
    double x, y, latency_us, utilization;
  };
  std::vector<Point> m_pending;
  std::vector<double> m_xs, m_ys;
  std::vector<double> m_utilization; // xs × ys, NaN where not measured
  std::vector<double> m_latency;
  GridAnswer nearest(double x, double y) const;
  double at(std::size_t ix, std::size_t iy) const { return m_utilization[ix * m_ys.size() + iy]; }
};

} // namespace optkit::perf
