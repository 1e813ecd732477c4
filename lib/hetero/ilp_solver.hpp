// SplitQuant's ILP (seed 003, objective (4), constraints (5)–(16)) built and solved with CBC
// (COIN-OR Branch and Cut, Debian's coinor-libcbc-dev, linked statically). Binaries z[u,j,b]
// (unit u on stage j at bit option b) and their stage marginals x[u,j]; the contiguous,
// monotone partition is written with cumulative sums (Σ_{k≤j} x[u,k] ≤ Σ_{k≤j} x[u−1,k]), which
// says the same as SplitQuant's pairwise (16) with O(U·N) rows instead of O(U·N²) and a tighter
// relaxation. With `accuracy_only` the latency terms are dropped: the adabits seed of the
// bitwidth-transfer heuristic (min Σ ω subject to memory and order).
#pragma once

#include "hetero/pipeline_problem.hpp"

#include <optional>

namespace optkit::hetero {

struct IlpOptions {
  double time_limit_s = 10;
  double relative_gap = 1e-4; // stop when proven within this fraction of the optimum
  bool accuracy_only = false;
  const Assignment* start = nullptr; // a feasible solution to start from (CBC's MIP start)
};

struct IlpResult {
  std::optional<Assignment> assignment; // none: no feasible solution found in the time limit
  bool proven_optimal = false;
  bool proven_infeasible = false;
  double objective = 0; // of the solution, as the ILP states it
  double bound = 0;     // the best bound CBC proved
  double gap = 0;       // (objective − bound) / objective
  double seconds = 0;
};

IlpResult solve_ilp(const PipelineProblem& problem, const IlpOptions& options);

} // namespace optkit::hetero
