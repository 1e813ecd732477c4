#include "hetero/bitwidth_transfer.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>

namespace optkit::hetero {

namespace {

double
stage_bytes(const PipelineProblem& p, const Assignment& a, int stage) {
  double bytes = 0;
  for (int u = 0; u < p.units(); ++u)
    if (a.stage[std::size_t(u)] == stage)
      bytes += p.unit_bytes[std::size_t(u)][std::size_t(a.bit[std::size_t(u)])];
  return bytes;
}

// Lowers units of `stage` one bit option at a time (smallest indicator increase per byte saved
// first) until the stage fits. False when it cannot.
bool
fit_stage(const PipelineProblem& p, Assignment& a, int stage) {
  double bytes = stage_bytes(p, a, stage);
  const double capacity = p.stages[std::size_t(stage)].capacity_bytes;
  while (bytes > capacity) {
    int best = -1;
    double best_ratio = std::numeric_limits<double>::infinity();
    for (int u = 0; u < p.units(); ++u) {
      const int b = a.bit[std::size_t(u)];
      if (a.stage[std::size_t(u)] != stage || b == 0)
        continue;
      const auto& bytes_of = p.unit_bytes[std::size_t(u)];
      const double saved = bytes_of[std::size_t(b)] - bytes_of[std::size_t(b - 1)];
      if (saved <= 0)
        continue;
      const double cost = p.omega[std::size_t(u)][std::size_t(b - 1)] - p.omega[std::size_t(u)][std::size_t(b)];
      if (cost / saved < best_ratio) {
        best_ratio = cost / saved;
        best = u;
      }
    }
    if (best < 0)
      return false;
    const int b = a.bit[std::size_t(best)];
    bytes -= p.unit_bytes[std::size_t(best)][std::size_t(b)] - p.unit_bytes[std::size_t(best)][std::size_t(b - 1)];
    --a.bit[std::size_t(best)];
  }
  return true;
}

} // namespace

std::optional<Assignment>
greedy_start(const PipelineProblem& p) {
  const int units = p.units();
  const int stages = p.stage_count();
  if (units < stages || stages == 0)
    return std::nullopt;
  const std::size_t top = p.bits.size() - 1;
  std::vector<double> speed(static_cast<std::size_t>(stages));
  for (int j = 0; j < stages; ++j)
    speed[std::size_t(j)] = 1.0 / std::max(1e-12, p.stages[std::size_t(j)].decode_s[top]);
  const double total_speed = std::accumulate(speed.begin(), speed.end(), 0.0);
  // Two splits: by speed, then by memory (the capacity-bound case).
  std::vector<double> capacity(static_cast<std::size_t>(stages));
  for (int j = 0; j < stages; ++j)
    capacity[std::size_t(j)] = p.stages[std::size_t(j)].capacity_bytes;
  const double total_capacity = std::accumulate(capacity.begin(), capacity.end(), 0.0);
  for (const auto* weights : {&speed, &capacity}) {
    const double total = weights == &speed ? total_speed : total_capacity;
    Assignment a;
    a.stage.resize(std::size_t(units));
    a.bit.assign(std::size_t(units), static_cast<int>(top));
    double cumulative = 0;
    int u = 0;
    for (int j = 0; j < stages; ++j) {
      cumulative += (*weights)[std::size_t(j)];
      int end = j == stages - 1 ? units : static_cast<int>(std::lround(cumulative / total * units));
      end = std::clamp(end, u + 1, units - (stages - 1 - j)); // every stage gets at least one unit
      for (; u < end; ++u)
        a.stage[std::size_t(u)] = j;
    }
    bool fits = true;
    for (int j = 0; j < stages && fits; ++j)
      fits = fit_stage(p, a, j);
    if (fits && evaluate(p, a).feasible)
      return a;
  }
  return std::nullopt;
}

Assignment
bitwidth_transfer(const PipelineProblem& p, Assignment current) {
  Evaluation now = evaluate(p, current);
  if (!now.feasible)
    return current;
  const int units = p.units();
  const int bit_options = static_cast<int>(p.bits.size());
  for (;;) {
    Assignment best = current;
    double best_objective = now.objective;
    const auto consider = [&](const Assignment& candidate) {
      const Evaluation e = evaluate(p, candidate);
      if (e.feasible && e.objective < best_objective - 1e-12 * std::max(1.0, std::abs(best_objective))) {
        best_objective = e.objective;
        best = candidate;
      }
    };
    // Transfers across each boundary between stage j (units ending at `last`) and stage j + 1.
    for (int u = 0; u + 1 < units; ++u) {
      if (current.stage[std::size_t(u)] == current.stage[std::size_t(u + 1)])
        continue;
      const int left = current.stage[std::size_t(u)];
      const int right = current.stage[std::size_t(u + 1)];
      for (const int k : {1, 2, 4}) {
        for (int b = 0; b < bit_options; ++b) {
          // k units from the left stage's end to the right stage.
          if (u - k + 1 >= 0 && (u - k < 0 || current.stage[std::size_t(u - k)] == left)) {
            Assignment c = current;
            for (int i = u - k + 1; i <= u; ++i) {
              c.stage[std::size_t(i)] = right;
              c.bit[std::size_t(i)] = b;
            }
            if (fit_stage(p, c, right))
              consider(c);
          }
          // k units from the right stage's start to the left stage.
          if (u + k < units && (u + k + 1 >= units || current.stage[std::size_t(u + k + 1)] == right)) {
            Assignment c = current;
            for (int i = u + 1; i <= u + k; ++i) {
              c.stage[std::size_t(i)] = left;
              c.bit[std::size_t(i)] = b;
            }
            if (fit_stage(p, c, left))
              consider(c);
          }
        }
      }
    }
    // One unit's bitwidth one option up or down.
    for (int u = 0; u < units; ++u)
      for (const int step : {-1, 1}) {
        const int b = current.bit[std::size_t(u)] + step;
        if (b < 0 || b >= bit_options)
          continue;
        Assignment c = current;
        c.bit[std::size_t(u)] = b;
        consider(c);
      }
    if (best_objective >= now.objective)
      return current;
    current = std::move(best);
    now = evaluate(p, current);
  }
}

} // namespace optkit::hetero
