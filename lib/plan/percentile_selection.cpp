#include "plan/percentile_selection.hpp"

#include "core/thread_pool.hpp"

#include <algorithm>

namespace optkit::plan {

namespace {

std::vector<std::size_t>
candidate_rows(const PlanResult& result) {
  std::vector<std::size_t> rows;
  for (std::size_t i : result.pareto)
    if (result.rows[i].meets_sla)
      rows.push_back(i);
  std::vector<std::size_t> others;
  for (std::size_t i = 0; i < result.rows.size(); ++i)
    if (result.rows[i].meets_sla && std::find(rows.begin(), rows.end(), i) == rows.end())
      others.push_back(i);
  std::stable_sort(others.begin(), others.end(), [&](std::size_t a, std::size_t b) {
    return result.rows[a].tokens_per_s_per_gpu > result.rows[b].tokens_per_s_per_gpu;
  });
  rows.insert(rows.end(), others.begin(), others.end());
  if (rows.size() > kMaxSimulatedRows)
    rows.resize(kMaxSimulatedRows);
  return rows;
}

bool
tail_meets(const RowTail& tail) {
  return tail.at_capacity.meets() && (!tail.at_rate || tail.at_rate->meets());
}

} // namespace

std::vector<RowTail>
judge_percentile_slas(const PlanRequest& request, const perf::SystemSpec& system, const perf::PerfDatabase& db,
                      PlanResult& result, const TailOptions& options) {
  const std::vector<std::size_t> candidates = candidate_rows(result);
  std::vector<RowTail> tails(candidates.size());
  ThreadPool pool;
  pool.parallel_for(
      std::int64_t(candidates.size()),
      [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t k = begin; k < end; ++k) {
          const std::size_t row = candidates[std::size_t(k)];
          const RowPricing pricing(request, system, db, result.rows[row]);
          tails[std::size_t(k)] = row_tail(request, result.rows[row], row, pricing.costs(), options);
        }
      },
      1);
  for (PlanRow& row : result.rows)
    row.meets_sla = false;
  result.best.reset();
  result.closest.reset();
  std::stable_sort(tails.begin(), tails.end(), [](const RowTail& a, const RowTail& b) {
    if (tail_meets(a) != tail_meets(b))
      return tail_meets(a);
    return a.tokens_per_s_per_gpu > b.tokens_per_s_per_gpu;
  });
  for (const RowTail& tail : tails)
    result.rows[tail.row].meets_sla = tail_meets(tail);
  if (!tails.empty()) {
    (tail_meets(tails.front()) ? result.best : result.closest) = tails.front().row;
  }
  return tails;
}

} // namespace optkit::plan
