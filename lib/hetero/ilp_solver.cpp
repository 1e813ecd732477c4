#include "hetero/ilp_solver.hpp"

#include <coin/Cbc_C_Interface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace optkit::hetero {

namespace {

struct ModelDeleter {
  void operator()(Cbc_Model* m) const { Cbc_deleteModel(m); }
};

struct Row {
  std::vector<int> cols;
  std::vector<double> coefs;
  void add(int col, double coef) {
    if (coef != 0) {
      cols.push_back(col);
      coefs.push_back(coef);
    }
  }
};

} // namespace

IlpResult
solve_ilp(const PipelineProblem& p, const IlpOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  const int units = p.units();
  const int stages = p.stage_count();
  const int bits = static_cast<int>(p.bits.size());
  const auto z = [&](int u, int j, int b) { return (u * stages + j) * bits + b; };
  const int x0 = units * stages * bits;
  const auto x = [&](int u, int j) { return x0 + u * stages + j; };
  const int t_pre = x0 + units * stages;
  const int t_dec = t_pre + 1;
  const bool latency = !options.accuracy_only;

  std::unique_ptr<Cbc_Model, ModelDeleter> model(Cbc_newModel());
  Cbc_Model* m = model.get();
  Cbc_setLogLevel(m, 0);
  Cbc_setObjSense(m, 1); // minimise
  for (int u = 0; u < units; ++u)
    for (int j = 0; j < stages; ++j)
      for (int b = 0; b < bits; ++b) {
        const auto& s = p.stages[std::size_t(j)];
        double cost = p.theta * p.omega[std::size_t(u)][std::size_t(b)];
        if (options.accuracy_only)
          cost = p.omega[std::size_t(u)][std::size_t(b)];
        else
          cost += s.prefill_s[std::size_t(b)] + p.decode_rounds * s.decode_s[std::size_t(b)];
        Cbc_addCol(m, "", 0, 1, cost, 1, 0, nullptr, nullptr);
      }
  for (int u = 0; u < units; ++u)
    for (int j = 0; j < stages; ++j) {
      const bool pinned = (u == 0 && j == 0) || (u == units - 1 && j == stages - 1); // (15)
      Cbc_addCol(m, "", pinned ? 1 : 0, 1, 0, 1, 0, nullptr, nullptr);
    }
  double transfer_pre = 0, transfer_dec = 0;
  for (const auto& s : p.stages) {
    transfer_pre = std::max(transfer_pre, s.transfer_prefill_s);
    transfer_dec = std::max(transfer_dec, s.transfer_decode_s);
  }
  // T^pre_max, T^dec_max, bounded below by every hand-off (7).
  Cbc_addCol(m, "", transfer_pre, std::numeric_limits<double>::max(), latency ? p.prefill_micro_batches - 1 : 0, 0, 0,
             nullptr, nullptr);
  Cbc_addCol(m, "", transfer_dec, std::numeric_limits<double>::max(),
             latency ? p.decode_rounds * (p.decode_micro_batches - 1) : 0, 0, 0, nullptr, nullptr);

  const auto add_row = [&](const Row& r, char sense, double rhs) {
    Cbc_addRow(m, "", static_cast<int>(r.cols.size()), r.cols.data(), r.coefs.data(), sense, rhs);
  };
  for (int u = 0; u < units; ++u) {
    Row one; // (9): one stage per unit (through x)
    for (int j = 0; j < stages; ++j) {
      Row marginal; // (11): x[u,j] = Σ_b z[u,j,b]
      for (int b = 0; b < bits; ++b)
        marginal.add(z(u, j, b), 1);
      marginal.add(x(u, j), -1);
      add_row(marginal, 'E', 0);
      one.add(x(u, j), 1);
    }
    add_row(one, 'E', 1);
  }
  for (int u = 1; u < units; ++u) // (16), cumulative: a unit's stage is never before its predecessor's
    for (int j = 0; j + 1 < stages; ++j) {
      Row order;
      for (int k = 0; k <= j; ++k) {
        order.add(x(u, k), 1);
        order.add(x(u - 1, k), -1);
      }
      add_row(order, 'L', 0);
    }
  for (int j = 0; j < stages; ++j) {
    const auto& s = p.stages[std::size_t(j)];
    // The memory row in fractions of the stage's capacity, so CBC's absolute tolerances (~1e-7)
    // mean the same for bytes of a 70B model and for a test's unit sizes.
    const double scale = s.capacity_bytes > 0 ? s.capacity_bytes : 1.0;
    Row used, memory, pre, dec;
    for (int u = 0; u < units; ++u) {
      used.add(x(u, j), 1);
      for (int b = 0; b < bits; ++b) {
        memory.add(z(u, j, b), p.unit_bytes[std::size_t(u)][std::size_t(b)] / scale); // fractions of capacity
        pre.add(z(u, j, b), s.prefill_s[std::size_t(b)]);
        dec.add(z(u, j, b), s.decode_s[std::size_t(b)]);
      }
    }
    add_row(used, 'G', 1);                          // every stage holds a layer
    add_row(memory, 'L', s.capacity_bytes / scale); // (12), (13)
    if (latency) {                                  // (5), (6)
      pre.add(t_pre, -1);
      dec.add(t_dec, -1);
      add_row(pre, 'L', -s.fixed_prefill_s);
      add_row(dec, 'L', -s.fixed_decode_s);
    }
  }
  if (options.start != nullptr) {
    std::vector<int> cols;
    std::vector<double> values;
    for (int u = 0; u < units; ++u) {
      const int j = options.start->stage[std::size_t(u)];
      const int b = options.start->bit[std::size_t(u)];
      cols.push_back(z(u, j, b));
      values.push_back(1);
      cols.push_back(x(u, j));
      values.push_back(1);
    }
    Cbc_setMIPStartI(m, static_cast<int>(cols.size()), cols.data(), values.data());
  }
  Cbc_setMaximumSeconds(m, options.time_limit_s);
  Cbc_setAllowableFractionGap(m, options.relative_gap);
  // Objectives are in seconds (often below 1): CBC's default absolute gap and cutoff increment
  // (1e-5-ish) would stop it short of the optimum, so only the relative gap above counts.
  Cbc_setAllowableGap(m, 1e-12);
  Cbc_setParameter(m, "increment", "1e-12");
  Cbc_setParameter(m, "threads", "1");
  Cbc_setParameter(m, "timeMode", "elapsed"); // the limit is wall-clock seconds, not CPU seconds
  Cbc_solve(m);

  IlpResult result;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  result.proven_optimal = Cbc_isProvenOptimal(m) != 0;
  result.proven_infeasible = Cbc_isProvenInfeasible(m) != 0;
  const double* solution = Cbc_numberSavedSolutions(m) > 0 || result.proven_optimal ? Cbc_getColSolution(m) : nullptr;
  if (solution != nullptr && !result.proven_infeasible) {
    Assignment a;
    a.stage.assign(std::size_t(units), -1);
    a.bit.assign(std::size_t(units), -1);
    bool complete = true;
    for (int u = 0; u < units; ++u) {
      for (int j = 0; j < stages; ++j)
        for (int b = 0; b < bits; ++b)
          if (solution[z(u, j, b)] > 0.5) {
            a.stage[std::size_t(u)] = j;
            a.bit[std::size_t(u)] = b;
          }
      complete = complete && a.stage[std::size_t(u)] >= 0;
    }
    if (complete) {
      result.assignment = std::move(a);
      double fixed = 0;
      if (latency)
        for (const auto& s : p.stages)
          fixed += s.fixed_prefill_s + p.decode_rounds * s.fixed_decode_s;
      result.objective = Cbc_getObjValue(m) + fixed;
      result.bound = std::min(result.objective, Cbc_getBestPossibleObjValue(m) + fixed);
      result.gap = result.proven_optimal || result.objective <= 0
                       ? 0
                       : std::max(0.0, (result.objective - result.bound) / std::fabs(result.objective));
    }
  }
  return result;
}

} // namespace optkit::hetero
