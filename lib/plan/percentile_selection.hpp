// plan --slo: the rows that meet the mean SLA, served on the simulator under Poisson arrivals
// (plan/tail_latency.hpp), judged by percentiles. A row meets the SLA only if it was simulated and
// its SLOs hold at --rate (when given) and at some rate at all; the best is the one serving the
// most tokens/s per GPU at the highest rate whose SLOs hold.
#pragma once

#include "plan/search.hpp"
#include "plan/tail_latency.hpp"

#include <vector>

namespace optkit::plan {

// Rows simulated at most: the Pareto rows that meet the mean SLA, then the others by tokens/s/GPU.
constexpr std::size_t kMaxSimulatedRows = 32;

// Simulates the candidates (in parallel), sets each row's meets_sla by its percentiles and picks
// result.best (or result.closest: the simulated row whose SLOs held at the highest rate, else the
// first simulated). Returns the simulated rows' tails, best first.
std::vector<RowTail> judge_percentile_slas(const PlanRequest& request, const perf::SystemSpec& system,
                                           const perf::PerfDatabase& db, PlanResult& result,
                                           const TailOptions& options);

} // namespace optkit::plan
