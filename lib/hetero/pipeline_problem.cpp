#include "hetero/pipeline_problem.hpp"

#include <algorithm>
#include <cstddef>

namespace optkit::hetero {

Evaluation
evaluate(const PipelineProblem& p, const Assignment& a) {
  Evaluation e;
  const int n = p.stage_count();
  e.stage_prefill_s.assign(std::size_t(n), 0.0);
  e.stage_decode_s.assign(std::size_t(n), 0.0);
  e.stage_bytes.assign(std::size_t(n), 0.0);
  if (static_cast<int>(a.stage.size()) != p.units() || static_cast<int>(a.bit.size()) != p.units()) {
    e.why = "the assignment does not cover every unit";
    return e;
  }
  std::vector<int> used(std::size_t(n), 0);
  for (int u = 0; u < p.units(); ++u) {
    const int j = a.stage[std::size_t(u)];
    const int b = a.bit[std::size_t(u)];
    if (j < 0 || j >= n || b < 0 || b >= static_cast<int>(p.bits.size())) {
      e.why = "unit " + std::to_string(u) + " has no valid stage or bitwidth";
      return e;
    }
    if (u > 0 && j < a.stage[std::size_t(u - 1)]) {
      e.why = "the stages are not contiguous at unit " + std::to_string(u);
      return e;
    }
    const auto& s = p.stages[std::size_t(j)];
    e.stage_prefill_s[std::size_t(j)] += s.prefill_s[std::size_t(b)];
    e.stage_decode_s[std::size_t(j)] += s.decode_s[std::size_t(b)];
    e.stage_bytes[std::size_t(j)] += p.unit_bytes[std::size_t(u)][std::size_t(b)];
    e.indicator += p.omega[std::size_t(u)][std::size_t(b)];
    ++used[std::size_t(j)];
  }
  double sum_pre = 0, sum_dec = 0, max_pre = 0, max_dec = 0;
  for (int j = 0; j < n; ++j) {
    const auto& s = p.stages[std::size_t(j)];
    if (used[std::size_t(j)] == 0) {
      e.why = "stage " + std::to_string(j) + " holds no layer";
      return e;
    }
    e.stage_prefill_s[std::size_t(j)] += s.fixed_prefill_s;
    e.stage_decode_s[std::size_t(j)] += s.fixed_decode_s;
    if (e.stage_bytes[std::size_t(j)] > s.capacity_bytes * (1 + 1e-9)) {
      e.why = "stage " + std::to_string(j) + " needs more memory than it has";
      return e;
    }
    sum_pre += e.stage_prefill_s[std::size_t(j)];
    sum_dec += e.stage_decode_s[std::size_t(j)];
    max_pre = std::max({max_pre, e.stage_prefill_s[std::size_t(j)], s.transfer_prefill_s});
    max_dec = std::max({max_dec, e.stage_decode_s[std::size_t(j)], s.transfer_decode_s});
  }
  e.latency_s = sum_pre + (p.prefill_micro_batches - 1) * max_pre +
                p.decode_rounds * (sum_dec + (p.decode_micro_batches - 1) * max_dec);
  e.objective = e.latency_s + p.theta * e.indicator;
  e.feasible = true;
  return e;
}

} // namespace optkit::hetero
