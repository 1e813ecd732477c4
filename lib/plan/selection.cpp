#include "plan/search.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace optkit::plan {

std::vector<std::size_t>
pareto_front(const std::vector<PlanRow>& rows, std::vector<std::size_t> indices) {
  std::sort(indices.begin(), indices.end(), [&](std::size_t a, std::size_t b) {
    if (rows[a].tokens_per_s_per_user != rows[b].tokens_per_s_per_user)
      return rows[a].tokens_per_s_per_user > rows[b].tokens_per_s_per_user;
    return rows[a].tokens_per_s_per_gpu > rows[b].tokens_per_s_per_gpu;
  });
  std::vector<std::size_t> front;
  double best_throughput = -1;
  for (std::size_t i : indices)
    if (rows[i].tokens_per_s_per_gpu > best_throughput) {
      best_throughput = rows[i].tokens_per_s_per_gpu;
      front.push_back(i);
    }
  return front;
}

void
judge_sla(const PlanRequest& request, PlanRow& row) {
  row.request_latency_ms = row.ttft_ms + std::max(0.0, request.workload.osl - 1) * row.tpot_ms;
  row.meets_sla = row.ttft_ms <= request.ttft_limit_ms && row.tpot_ms <= request.tpot_limit_ms &&
                  (!request.request_latency_limit_ms || row.request_latency_ms <= *request.request_latency_limit_ms);
}

void
select_configurations(const PlanRequest& request, PlanResult& result) {
  for (PlanRow& row : result.rows)
    judge_sla(request, row);
  std::vector<std::size_t> all(result.rows.size());
  for (std::size_t i = 0; i < all.size(); ++i)
    all[i] = i;
  result.pareto = pareto_front(result.rows, all);
  double best_throughput = -1, closest_overshoot = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < result.rows.size(); ++i) {
    const PlanRow& row = result.rows[i];
    if (row.meets_sla && row.tokens_per_s_per_gpu > best_throughput) {
      best_throughput = row.tokens_per_s_per_gpu;
      result.best = i;
    }
    const double overshoot =
        std::max({row.ttft_ms / request.ttft_limit_ms, row.tpot_ms / request.tpot_limit_ms,
                  request.request_latency_limit_ms ? row.request_latency_ms / *request.request_latency_limit_ms : 0.0});
    if (overshoot < closest_overshoot) {
      closest_overshoot = overshoot;
      result.closest = i;
    }
  }
  if (request.target_requests_per_s) {
    const double target = *request.target_requests_per_s;
    for (std::size_t i = 0; i < result.rows.size(); ++i) {
      const PlanRow& row = result.rows[i];
      if (!row.meets_sla || row.requests_per_s <= 0)
        continue;
      const int replicas = int(std::ceil(target / row.requests_per_s - 1e-9));
      const int gpus = replicas * row.unit_gpus;
      if (!result.target || gpus < result.target->gpus ||
          (gpus == result.target->gpus &&
           row.tokens_per_s_per_gpu > result.rows[result.target->row].tokens_per_s_per_gpu))
        result.target = TargetRatePlan{i, replicas, gpus};
    }
  }
}

} // namespace optkit::plan
