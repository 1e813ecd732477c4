#include "perf/utilization_grid.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace optkit::perf {

namespace {

// Index of the last axis value ≤ v (clamped), and the log-space weight of the next one.
struct Bracket {
  std::size_t low = 0, high = 0;
  double weight = 0; // of `high`
  bool inside = true;
  bool exact = false;
};

Bracket
bracket(const std::vector<double>& axis, double v) {
  Bracket b;
  if (v <= axis.front()) {
    b.inside = v == axis.front();
    b.exact = b.inside;
    return b;
  }
  if (v >= axis.back()) {
    b.low = b.high = axis.size() - 1;
    b.inside = v == axis.back();
    b.exact = b.inside;
    return b;
  }
  const auto it = std::upper_bound(axis.begin(), axis.end(), v);
  b.high = std::size_t(it - axis.begin());
  b.low = b.high - 1;
  if (axis[b.low] == v) {
    b.high = b.low;
    b.exact = true;
    return b;
  }
  const double lo = std::log(std::max(axis[b.low], 1e-9)), hi = std::log(std::max(axis[b.high], 1e-9));
  b.weight = hi > lo ? (std::log(std::max(v, 1e-9)) - lo) / (hi - lo) : 0;
  return b;
}

} // namespace

void
UtilizationGrid::add(double x, double y, double latency_us, double speed_of_light_us) {
  m_pending.push_back({x, y, latency_us, speed_of_light_us / latency_us});
}

void
UtilizationGrid::finish() {
  m_xs.clear();
  m_ys.clear();
  for (const auto& p : m_pending) {
    m_xs.push_back(p.x);
    m_ys.push_back(p.y);
  }
  for (auto* axis : {&m_xs, &m_ys}) {
    std::sort(axis->begin(), axis->end());
    axis->erase(std::unique(axis->begin(), axis->end()), axis->end());
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  m_utilization.assign(m_xs.size() * m_ys.size(), nan);
  m_latency.assign(m_xs.size() * m_ys.size(), nan);
  for (const auto& p : m_pending) {
    const auto ix = std::size_t(std::lower_bound(m_xs.begin(), m_xs.end(), p.x) - m_xs.begin());
    const auto iy = std::size_t(std::lower_bound(m_ys.begin(), m_ys.end(), p.y) - m_ys.begin());
    m_utilization[ix * m_ys.size() + iy] = p.utilization;
    m_latency[ix * m_ys.size() + iy] = p.latency_us;
  }
}

GridAnswer
UtilizationGrid::nearest(double x, double y) const {
  GridAnswer best;
  double best_distance = std::numeric_limits<double>::infinity();
  for (std::size_t ix = 0; ix < m_xs.size(); ++ix)
    for (std::size_t iy = 0; iy < m_ys.size(); ++iy) {
      const double u = at(ix, iy);
      if (std::isnan(u))
        continue;
      const double dx = std::log((m_xs[ix] + 1) / (x + 1)), dy = std::log((m_ys[iy] + 1) / (y + 1));
      const double distance = dx * dx + dy * dy;
      if (distance < best_distance) {
        best_distance = distance;
        best.utilization = u;
      }
    }
  best.source = extrapolated;
  return best;
}

GridAnswer
UtilizationGrid::query(double x, double y) const {
  if (m_xs.empty())
    return {};
  const Bracket bx = bracket(m_xs, x), by = bracket(m_ys, y);
  if (bx.exact && by.exact) {
    const std::size_t index = bx.low * m_ys.size() + by.low;
    if (!std::isnan(m_latency[index]))
      return {m_utilization[index], m_latency[index], measured};
  }
  const double u00 = at(bx.low, by.low), u01 = at(bx.low, by.high);
  const double u10 = at(bx.high, by.low), u11 = at(bx.high, by.high);
  if (std::isnan(u00) || std::isnan(u01) || std::isnan(u10) || std::isnan(u11))
    return nearest(x, y);
  const double low = u00 + (u01 - u00) * by.weight;
  const double high = u10 + (u11 - u10) * by.weight;
  GridAnswer answer;
  answer.utilization = low + (high - low) * bx.weight;
  answer.source = bx.inside && by.inside ? interpolated : extrapolated;
  return answer;
}

} // namespace optkit::perf
