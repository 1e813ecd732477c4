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

// SplitQuant's ILP (its equation numbers in comments) as a CBC model. Columns: z[u,j,b] (unit u
// on stage j at bit option b), x[u,j] = Σ_b z[u,j,b], then T^pre_max and T^dec_max.
class PipelineIlp {
public:
  PipelineIlp(const PipelineProblem& p, const IlpOptions& options)
      : m_p(p)
      , m_options(options)
      , m_units(p.units())
      , m_stages(p.stage_count())
      , m_bits(static_cast<int>(p.bits.size()))
      , m_x0(m_units * m_stages * m_bits)
      , m_t_pre(m_x0 + m_units * m_stages)
      , m_t_dec(m_t_pre + 1)
      , m_latency(!options.accuracy_only)
      , m_started(std::chrono::steady_clock::now())
      , m_model(Cbc_newModel()) {
    Cbc_setLogLevel(m_model.get(), 0);
    Cbc_setObjSense(m_model.get(), 1); // minimise
    add_columns();
    add_assignment_rows();
    add_order_rows();
    add_stage_rows();
    if (options.start != nullptr)
      set_start(*options.start);
  }

  IlpResult solve() {
    Cbc_Model* m = m_model.get();
    Cbc_setMaximumSeconds(m, m_options.time_limit_s);
    Cbc_setAllowableFractionGap(m, m_options.relative_gap);
    // Objectives are in seconds (often below 1): CBC's default absolute gap and cutoff increment
    // (1e-5-ish) would stop it short of the optimum, so only the relative gap above counts.
    Cbc_setAllowableGap(m, 1e-12);
    Cbc_setParameter(m, "increment", "1e-12");
    Cbc_setParameter(m, "threads", "1");
    Cbc_setParameter(m, "timeMode", "elapsed"); // the limit is wall-clock seconds, not CPU seconds
    Cbc_solve(m);
    IlpResult result;
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_started).count();
    result.proven_optimal = Cbc_isProvenOptimal(m) != 0;
    result.proven_infeasible = Cbc_isProvenInfeasible(m) != 0;
    const double* solution = Cbc_numberSavedSolutions(m) > 0 || result.proven_optimal ? Cbc_getColSolution(m) : nullptr;
    if (solution != nullptr && !result.proven_infeasible)
      read_solution(solution, result);
    return result;
  }

private:
  int z(int u, int j, int b) const { return (u * m_stages + j) * m_bits + b; }
  int x(int u, int j) const { return m_x0 + u * m_stages + j; }

  void add_row(const Row& r, char sense, double rhs) {
    Cbc_addRow(m_model.get(), "", static_cast<int>(r.cols.size()), r.cols.data(), r.coefs.data(), sense, rhs);
  }

  void add_columns() {
    Cbc_Model* m = m_model.get();
    for (int u = 0; u < m_units; ++u)
      for (int j = 0; j < m_stages; ++j)
        for (int b = 0; b < m_bits; ++b) {
          const auto& s = m_p.stages[std::size_t(j)];
          const double omega = m_p.omega[std::size_t(u)][std::size_t(b)];
          const double cost =
              m_options.accuracy_only
                  ? omega
                  : m_p.theta * omega + (s.prefill_s[std::size_t(b)] + m_p.decode_rounds * s.decode_s[std::size_t(b)]);
          Cbc_addCol(m, "", 0, 1, cost, 1, 0, nullptr, nullptr);
        }
    for (int u = 0; u < m_units; ++u)
      for (int j = 0; j < m_stages; ++j) {
        const bool pinned = (u == 0 && j == 0) || (u == m_units - 1 && j == m_stages - 1); // (15)
        Cbc_addCol(m, "", pinned ? 1 : 0, 1, 0, 1, 0, nullptr, nullptr);
      }
    double transfer_pre = 0, transfer_dec = 0;
    for (const auto& s : m_p.stages) {
      transfer_pre = std::max(transfer_pre, s.transfer_prefill_s);
      transfer_dec = std::max(transfer_dec, s.transfer_decode_s);
    }
    // T^pre_max, T^dec_max, bounded below by every hand-off (7).
    Cbc_addCol(m, "", transfer_pre, std::numeric_limits<double>::max(), m_latency ? m_p.prefill_micro_batches - 1 : 0,
               0, 0, nullptr, nullptr);
    Cbc_addCol(m, "", transfer_dec, std::numeric_limits<double>::max(),
               m_latency ? m_p.decode_rounds * (m_p.decode_micro_batches - 1) : 0, 0, 0, nullptr, nullptr);
  }

  // (9): one stage per unit (through x); (11): x[u,j] = Σ_b z[u,j,b].
  void add_assignment_rows() {
    for (int u = 0; u < m_units; ++u) {
      Row one;
      for (int j = 0; j < m_stages; ++j) {
        Row marginal;
        for (int b = 0; b < m_bits; ++b)
          marginal.add(z(u, j, b), 1);
        marginal.add(x(u, j), -1);
        add_row(marginal, 'E', 0);
        one.add(x(u, j), 1);
      }
      add_row(one, 'E', 1);
    }
  }

  // (16), cumulative: a unit's stage is never before its predecessor's.
  void add_order_rows() {
    for (int u = 1; u < m_units; ++u)
      for (int j = 0; j + 1 < m_stages; ++j) {
        Row order;
        for (int k = 0; k <= j; ++k) {
          order.add(x(u, k), 1);
          order.add(x(u - 1, k), -1);
        }
        add_row(order, 'L', 0);
      }
  }

  // Per stage: it holds a layer, its memory (12), (13), and its prefill and decode times under
  // T^pre_max and T^dec_max (5), (6).
  void add_stage_rows() {
    for (int j = 0; j < m_stages; ++j) {
      const auto& s = m_p.stages[std::size_t(j)];
      // The memory row in fractions of the stage's capacity, so CBC's absolute tolerances (~1e-7)
      // mean the same for bytes of a 70B model and for a test's unit sizes.
      const double scale = s.capacity_bytes > 0 ? s.capacity_bytes : 1.0;
      Row used, memory, pre, dec;
      for (int u = 0; u < m_units; ++u) {
        used.add(x(u, j), 1);
        for (int b = 0; b < m_bits; ++b) {
          memory.add(z(u, j, b), m_p.unit_bytes[std::size_t(u)][std::size_t(b)] / scale);
          pre.add(z(u, j, b), s.prefill_s[std::size_t(b)]);
          dec.add(z(u, j, b), s.decode_s[std::size_t(b)]);
        }
      }
      add_row(used, 'G', 1);
      add_row(memory, 'L', s.capacity_bytes / scale);
      if (m_latency) {
        pre.add(m_t_pre, -1);
        dec.add(m_t_dec, -1);
        add_row(pre, 'L', -s.fixed_prefill_s);
        add_row(dec, 'L', -s.fixed_decode_s);
      }
    }
  }

  void set_start(const Assignment& start) {
    std::vector<int> cols;
    std::vector<double> values;
    for (int u = 0; u < m_units; ++u) {
      const int j = start.stage[std::size_t(u)];
      cols.push_back(z(u, j, start.bit[std::size_t(u)]));
      values.push_back(1);
      cols.push_back(x(u, j));
      values.push_back(1);
    }
    Cbc_setMIPStartI(m_model.get(), static_cast<int>(cols.size()), cols.data(), values.data());
  }

  // The assignment the solution's z columns make, when every unit has a stage, with its objective
  // (the stages' fixed times added back), bound and gap.
  void read_solution(const double* solution, IlpResult& result) const {
    Assignment a;
    a.stage.assign(std::size_t(m_units), -1);
    a.bit.assign(std::size_t(m_units), -1);
    for (int u = 0; u < m_units; ++u) {
      for (int j = 0; j < m_stages; ++j)
        for (int b = 0; b < m_bits; ++b)
          if (solution[z(u, j, b)] > 0.5) {
            a.stage[std::size_t(u)] = j;
            a.bit[std::size_t(u)] = b;
          }
      if (a.stage[std::size_t(u)] < 0)
        return;
    }
    result.assignment = std::move(a);
    double fixed = 0;
    if (m_latency)
      for (const auto& s : m_p.stages)
        fixed += s.fixed_prefill_s + m_p.decode_rounds * s.fixed_decode_s;
    result.objective = Cbc_getObjValue(m_model.get()) + fixed;
    result.bound = std::min(result.objective, Cbc_getBestPossibleObjValue(m_model.get()) + fixed);
    result.gap = result.proven_optimal || result.objective <= 0
                     ? 0
                     : std::max(0.0, (result.objective - result.bound) / std::fabs(result.objective));
  }

  const PipelineProblem& m_p;
  const IlpOptions& m_options;
  const int m_units, m_stages, m_bits;
  const int m_x0, m_t_pre, m_t_dec;                      // first x column, the two T_max columns
  const bool m_latency;                                  // the objective counts latency (not --accuracy only)
  const std::chrono::steady_clock::time_point m_started; // the model's building counts in result.seconds
  std::unique_ptr<Cbc_Model, ModelDeleter> m_model;
};

} // namespace

IlpResult
solve_ilp(const PipelineProblem& p, const IlpOptions& options) {
  return PipelineIlp(p, options).solve();
}

} // namespace optkit::hetero
