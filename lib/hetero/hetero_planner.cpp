#include "hetero/hetero_planner.hpp"

#include "core/clock.hpp"
#include "core/error.hpp"
#include "hetero/bitwidth_transfer.hpp"
#include "hetero/ilp_solver.hpp"
#include "perf/system_spec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace optkit::hetero {

namespace {

int
default_group_size(int layers) {
  for (int g = 1; g <= layers; ++g)
    if (layers % g == 0 && layers / g <= 40)
      return g;
  return 1;
}

struct Candidate {
  std::vector<int> order; // group index per stage
  int prefill_micro_batch = 1;
  PipelineProblem problem;
  Assignment assignment;
  double objective = 0;
};

PipelineProblem
build_problem(const LayerCosts& costs, const ClusterSpec& cluster, const std::vector<std::vector<double>>& omega,
              const HeteroOptions& o, const std::vector<int>& bits, const std::vector<int>& order, int group_size,
              int eta, int xi) {
  const auto& w = costs.workload();
  const int layers = costs.model().layers;
  PipelineProblem p;
  p.bits = bits;
  p.theta = o.theta;
  p.prefill_micro_batches = std::ceil(double(w.batch) / eta);
  p.decode_micro_batches = std::ceil(double(w.batch) / xi);
  p.decode_rounds = std::max(0, w.osl - 1);
  const int units = layers / group_size;
  p.unit_bytes.assign(std::size_t(units), {});
  p.omega.assign(std::size_t(units), std::vector<double>(bits.size(), 0.0));
  for (int u = 0; u < units; ++u)
    for (std::size_t b = 0; b < bits.size(); ++b) {
      p.unit_bytes[std::size_t(u)].push_back(group_size * (costs.layer_weight_bytes(bits[b]) + costs.layer_kv_bytes()));
      for (int l = u * group_size; l < (u + 1) * group_size; ++l)
        p.omega[std::size_t(u)][b] += omega[std::size_t(l)][b];
    }
  const int n = static_cast<int>(order.size());
  for (int j = 0; j < n; ++j) {
    const auto& group = cluster.groups[std::size_t(order[std::size_t(j)])];
    const auto& next = cluster.groups[std::size_t(order[std::size_t((j + 1) % n)])];
    StageCosts s;
    for (const int b : bits) {
      s.prefill_s.push_back(group_size * costs.prefill_layer(group, b, eta).us * 1e-6);
      s.decode_s.push_back(group_size * costs.decode_layer(group, b, xi).us * 1e-6);
    }
    if (j == 0) {
      s.fixed_prefill_s = costs.prefill_head(group, eta).us * 1e-6;
      s.fixed_decode_s = costs.decode_head(group, xi).us * 1e-6;
    }
    if (n > 1) {
      s.transfer_prefill_s = costs.prefill_transfer_s(group, next, eta);
      s.transfer_decode_s = costs.decode_transfer_s(group, next, xi);
    }
    s.capacity_bytes =
        costs.capacity_bytes(group) - costs.activation_bytes(eta) - (j == 0 ? costs.embedding_bytes() : 0.0);
    p.stages.push_back(std::move(s));
  }
  return p;
}

// Bitwidth transfer from the better of the greedy start and (with the solver) adabits.
std::optional<Assignment>
heuristic(const PipelineProblem& p, bool adabits) {
  std::optional<Assignment> best;
  double best_objective = 0;
  const auto improve_from = [&](std::optional<Assignment> start) {
    if (!start || !evaluate(p, *start).feasible)
      return;
    Assignment a = bitwidth_transfer(p, std::move(*start));
    const double objective = evaluate(p, a).objective;
    if (!best || objective < best_objective) {
      best = std::move(a);
      best_objective = objective;
    }
  };
  improve_from(greedy_start(p));
  if (adabits) {
    IlpOptions accuracy;
    accuracy.accuracy_only = true;
    accuracy.time_limit_s = 0.25; // a start, not the answer: the shape-only indicator makes it very degenerate
    improve_from(solve_ilp(p, accuracy).assignment);
  }
  return best;
}

} // namespace

HeteroPlan
plan_hetero(const LayerCosts& costs, const ClusterSpec& cluster, const std::vector<std::vector<double>>& omega,
            const HeteroOptions& options) {
  const auto& model = costs.model();
  const auto& w = costs.workload();
  std::vector<int> bits = options.bits;
  std::sort(bits.begin(), bits.end());
  bits.erase(std::unique(bits.begin(), bits.end()), bits.end());
  if (bits.empty())
    throw InputError("--bits: give at least one bitwidth");
  if (omega.size() != std::size_t(model.layers))
    throw std::logic_error("plan_hetero: one indicator row per layer expected");
  const int devices = cluster.devices();
  if (devices > model.layers)
    throw InputError(fmt::format("--cluster {}: {} GPUs for {} layers; every stage needs at least one layer",
                                 cluster.source, devices, model.layers));
  const int group_size = options.group_size > 0 ? options.group_size : default_group_size(model.layers);
  if (model.layers % group_size != 0)
    throw InputError(fmt::format("--group-size {}: must divide the model's {} layers", group_size, model.layers));
  if (devices > model.layers / group_size)
    throw InputError(fmt::format("--group-size {}: {} units for {} GPUs; make the groups smaller", group_size,
                                 model.layers / group_size, devices));
  const int xi = options.decode_micro_batch > 0 ? options.decode_micro_batch : (w.batch + devices - 1) / devices;
  std::vector<int> etas = options.prefill_micro_batches;
  if (etas.empty())
    for (int eta = 1; eta <= xi; eta *= 2)
      etas.push_back(eta);

  // Does the model fit at all, at the lowest bitwidth and the smallest prefill micro-batch?
  const int smallest_eta = *std::min_element(etas.begin(), etas.end());
  double offered = -costs.embedding_bytes();
  for (const auto& g : cluster.groups)
    offered += g.count * (costs.capacity_bytes(g) - costs.activation_bytes(smallest_eta));
  const double needed = model.layers * (costs.layer_weight_bytes(bits.front()) + costs.layer_kv_bytes());
  if (needed > offered)
    throw GoalNotMet(fmt::format(
        "--cluster {}: the model does not fit: {} layers at {} bits with the KV cache of batch {} at {} tokens need "
        "{:.1f} GiB, the GPUs offer {:.1f} GiB after the engine reserve, activations and embeddings: {:.1f} GiB "
        "missing",
        cluster.source, model.layers, bits.front(), w.batch, w.isl + w.osl, needed / perf::kGiB, offered / perf::kGiB,
        (needed - offered) / perf::kGiB));

  // Every order of the device groups (GPUs of one group stay together) × every η.
  const auto started = std::chrono::steady_clock::now();
  std::vector<int> groups(cluster.groups.size());
  std::iota(groups.begin(), groups.end(), 0);
  std::vector<Candidate> candidates;
  HeteroPlan plan;
  do {
    std::vector<int> order;
    for (const int g : groups)
      order.insert(order.end(), std::size_t(cluster.groups[std::size_t(g)].count), g);
    for (const int eta : etas) {
      Candidate c;
      c.order = order;
      c.prefill_micro_batch = eta;
      c.problem = build_problem(costs, cluster, omega, options, bits, order, group_size, eta, xi);
      ++plan.candidates;
      auto a = heuristic(c.problem, false);
      if (!a)
        continue;
      c.assignment = std::move(*a);
      c.objective = evaluate(c.problem, c.assignment).objective;
      candidates.push_back(std::move(c));
    }
  } while (std::next_permutation(groups.begin(), groups.end()));
  if (candidates.empty())
    throw GoalNotMet(fmt::format("--cluster {}: no placement fits: every order of the device groups leaves some GPU "
                                 "over its memory; add GPUs, lower --batch or --isl/--osl, or allow fewer --bits",
                                 cluster.source));
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.objective < b.objective; });
  // The adabits start on the leading candidates (it needs the solver).
  const int refined = std::min<int>(static_cast<int>(candidates.size()), std::max(1, options.ilp_candidates));
  if (options.use_ilp)
    for (int i = 0; i < refined; ++i) {
      auto& c = candidates[std::size_t(i)];
      if (auto a = heuristic(c.problem, true)) {
        const double objective = evaluate(c.problem, *a).objective;
        if (objective < c.objective) {
          c.assignment = std::move(*a);
          c.objective = objective;
        }
      }
    }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.objective < b.objective; });
  plan.heuristic_seconds = seconds_since(started);
  plan.heuristic_objective = candidates.front().objective;

  const Candidate* best = &candidates.front();
  Assignment best_assignment = best->assignment;
  double best_objective = best->objective;
  plan.method = "bitwidth-transfer";
  if (options.use_ilp) {
    const auto ilp_started = std::chrono::steady_clock::now();
    for (int i = 0; i < refined; ++i) {
      const double left = options.time_limit_s - seconds_since(ilp_started);
      if (left <= 0.05)
        break;
      const auto& c = candidates[std::size_t(i)];
      IlpOptions ilp;
      ilp.time_limit_s = left / (refined - i);
      ilp.start = &c.assignment;
      const IlpResult r = solve_ilp(c.problem, ilp);
      ++plan.ilp_solves;
      if (!r.assignment)
        continue;
      const Evaluation e = evaluate(c.problem, *r.assignment);
      if (!e.feasible)
        continue; // never report what the checker refuses
      if (e.objective < best_objective - 1e-12 || (best == &c && e.objective <= best_objective + 1e-12)) {
        best = &c;
        best_assignment = *r.assignment;
        best_objective = e.objective;
        plan.method = "ilp";
        plan.proven_optimal = r.proven_optimal;
        plan.gap = r.gap;
      }
    }
    plan.ilp_seconds = seconds_since(ilp_started);
  }

  // The plan, in layers.
  const Evaluation e = evaluate(best->problem, best_assignment);
  plan.prefill_micro_batch = best->prefill_micro_batch;
  plan.decode_micro_batch = xi;
  plan.group_size = group_size;
  plan.latency_s = e.latency_s;
  plan.indicator = e.indicator;
  plan.objective = e.objective;
  plan.throughput_tokens_per_s = e.latency_s > 0 ? double(w.batch) * w.osl / e.latency_s : 0;
  for (int u = 0; u < best->problem.units(); ++u)
    for (int l = 0; l < group_size; ++l)
      plan.layer_bits.push_back(bits[std::size_t(best_assignment.bit[std::size_t(u)])]);
  for (int j = 0; j < best->problem.stage_count(); ++j) {
    const auto& group = cluster.groups[std::size_t(best->order[std::size_t(j)])];
    StagePlan s;
    s.gpu = group.gpu;
    s.node = group.node;
    s.first_layer = -1;
    for (int u = 0; u < best->problem.units(); ++u)
      if (best_assignment.stage[std::size_t(u)] == j) {
        if (s.first_layer < 0)
          s.first_layer = u * group_size;
        s.end_layer = (u + 1) * group_size;
        const int b = bits[std::size_t(best_assignment.bit[std::size_t(u)])];
        s.sources |= costs.prefill_layer(group, b, plan.prefill_micro_batch).sources;
        s.sources |= costs.decode_layer(group, b, xi).sources;
      }
    s.memory_bytes = e.stage_bytes[std::size_t(j)] + costs.activation_bytes(plan.prefill_micro_batch) +
                     (j == 0 ? costs.embedding_bytes() : 0.0);
    s.capacity_bytes = costs.capacity_bytes(group);
    s.prefill_s = e.stage_prefill_s[std::size_t(j)];
    s.decode_s = e.stage_decode_s[std::size_t(j)];
    plan.stages.push_back(s);
  }
  return plan;
}

} // namespace optkit::hetero
