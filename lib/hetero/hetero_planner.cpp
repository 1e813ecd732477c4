#include "hetero/hetero_planner.hpp"

#include "core/clock.hpp"
#include "core/error.hpp"
#include "hetero/bitwidth_transfer.hpp"
#include "hetero/ilp_solver.hpp"
#include "hetero/stage_layouts.hpp"
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
  StageLayout order;
  int prefill_micro_batch = 1;
  int decode_micro_batch = 1;
  PipelineProblem problem;
  Assignment assignment;
  double objective = 0;
};

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

// The search's fixed parts: the bit options (sorted, distinct) and layers per unit.
struct SearchShape {
  std::vector<int> bits;
  int group_size = 1;
};

SearchShape
search_shape(const LayerCosts& costs, const ClusterSpec& cluster, const HeteroOptions& options) {
  const auto& model = costs.model();
  SearchShape shape;
  shape.bits = options.bits;
  std::sort(shape.bits.begin(), shape.bits.end());
  shape.bits.erase(std::unique(shape.bits.begin(), shape.bits.end()), shape.bits.end());
  if (shape.bits.empty())
    throw InputError("--bits: give at least one bitwidth");
  const int stages = fewest_stages(costs, cluster);
  if (stages > model.layers)
    throw InputError(fmt::format("--cluster {}: {} GPUs in at least {} stages for {} layers; every stage needs at "
                                 "least one layer",
                                 cluster.source, cluster.devices(), stages, model.layers));
  shape.group_size = options.group_size > 0 ? options.group_size : default_group_size(model.layers);
  if (model.layers % shape.group_size != 0)
    throw InputError(fmt::format("--group-size {}: must divide the model's {} layers", shape.group_size, model.layers));
  if (stages > model.layers / shape.group_size)
    throw InputError(fmt::format("--group-size {}: {} units for at least {} stages; make the groups smaller",
                                 shape.group_size, model.layers / shape.group_size, stages));
  return shape;
}

// GoalNotMet when the model does not fit at all, at the lowest bitwidth and the smallest prefill
// micro-batch, saying how much memory is missing.
void
check_model_fits(const LayerCosts& costs, const ClusterSpec& cluster, const SearchShape& shape,
                 const HeteroOptions& options) {
  const auto& model = costs.model();
  const auto& w = costs.workload();
  const auto& etas = options.prefill_micro_batches;
  const int smallest_eta = etas.empty() ? 1 : *std::min_element(etas.begin(), etas.end());
  double offered = -costs.embedding_bytes();
  for (const auto& g : cluster.groups)
    offered += g.count * (costs.capacity_bytes(g) - costs.activation_bytes(smallest_eta));
  const double needed = model.layers * (costs.layer_weight_bytes(shape.bits.front()) + costs.layer_kv_bytes());
  if (needed > offered)
    throw GoalNotMet(fmt::format(
        "--cluster {}: the model does not fit: {} layers at {} bits with the KV cache of batch {} at {} tokens need "
        "{:.1f} GiB, the GPUs offer {:.1f} GiB after the engine reserve, activations and embeddings: {:.1f} GiB "
        "missing",
        cluster.source, model.layers, shape.bits.front(), w.batch, w.isl + w.osl, needed / perf::kGiB,
        offered / perf::kGiB, (needed - offered) / perf::kGiB));
}

// Candidates improved by bitwidth transfer: the best greedy starts. Large clusters have thousands
// of layouts × η (3 groups of 4 GPUs: 1,152), and the local search costs far more than a start.
constexpr std::size_t kTransferredCandidates = 64;

// Every stage layout × every η placed by the greedy start; the best starts then improved by
// bitwidth transfer; those that fit, best first. Counts what it evaluated in plan.candidates.
std::vector<Candidate>
placed_candidates(const LayerCosts& costs, const ClusterSpec& cluster, const std::vector<std::vector<double>>& omega,
                  const HeteroOptions& options, const SearchShape& shape, HeteroPlan& plan) {
  const int units = costs.model().layers / shape.group_size;
  std::vector<Candidate> candidates;
  for (const auto& layout : stage_layouts(costs, cluster, units)) {
    const MicroBatches m = micro_batches(options.decode_micro_batch, options.prefill_micro_batches,
                                         costs.workload().batch, int(layout.size()));
    for (const int eta : m.etas) {
      Candidate c;
      c.order = layout;
      c.prefill_micro_batch = eta;
      c.decode_micro_batch = m.xi;
      c.problem = build_problem(costs, cluster, omega, shape.bits, options.theta, layout, shape.group_size, eta, m.xi);
      ++plan.candidates;
      auto start = greedy_start(c.problem);
      if (!start)
        continue;
      const Evaluation e = evaluate(c.problem, *start);
      if (!e.feasible)
        continue;
      c.assignment = std::move(*start);
      c.objective = e.objective;
      candidates.push_back(std::move(c));
    }
  }
  if (candidates.empty())
    throw GoalNotMet(fmt::format("--cluster {}: no placement fits: every order and split of the device groups leaves "
                                 "some GPU over its memory; add GPUs, lower --batch or --isl/--osl, or allow fewer "
                                 "--bits",
                                 cluster.source));
  const auto by_objective = [](const Candidate& a, const Candidate& b) { return a.objective < b.objective; };
  std::sort(candidates.begin(), candidates.end(), by_objective);
  for (std::size_t i = 0; i < std::min(candidates.size(), kTransferredCandidates); ++i) {
    Candidate& c = candidates[i];
    c.assignment = bitwidth_transfer(c.problem, std::move(c.assignment));
    c.objective = evaluate(c.problem, c.assignment).objective;
  }
  std::stable_sort(candidates.begin(), candidates.end(), by_objective);
  return candidates;
}

// The adabits start (it needs the solver) on the leading `refined` candidates, kept where better;
// the candidates re-sorted.
void
refine_with_adabits(std::vector<Candidate>& candidates, int refined) {
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
}

struct Chosen {
  const Candidate* candidate;
  Assignment assignment;
  double objective;
};

// The ILP from each leading candidate's placement, within --time-limit shared out; a solution
// replaces the best when better (or equal on the best's own candidate) and the checker accepts it.
Chosen
solve_leading(const std::vector<Candidate>& candidates, int refined, const HeteroOptions& options, HeteroPlan& plan) {
  Chosen best{&candidates.front(), candidates.front().assignment, candidates.front().objective};
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < refined; ++i) {
    const double left = options.time_limit_s - seconds_since(started);
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
    if (e.objective < best.objective - 1e-12 || (best.candidate == &c && e.objective <= best.objective + 1e-12)) {
      best = {&c, *r.assignment, e.objective};
      plan.method = "ilp";
      plan.proven_optimal = r.proven_optimal;
      plan.gap = r.gap;
    }
  }
  plan.ilp_seconds = seconds_since(started);
  return best;
}

// The chosen placement in layers: each stage's GPU, layers, bits' sources, memory and times.
void
describe_placement(const LayerCosts& costs, const ClusterSpec& cluster, const SearchShape& shape, const Chosen& best,
                   HeteroPlan& plan) {
  const auto& w = costs.workload();
  const auto& problem = best.candidate->problem;
  const Evaluation e = evaluate(problem, best.assignment);
  plan.prefill_micro_batch = best.candidate->prefill_micro_batch;
  plan.decode_micro_batch = best.candidate->decode_micro_batch;
  plan.group_size = shape.group_size;
  plan.latency_s = e.latency_s;
  plan.indicator = e.indicator;
  plan.objective = e.objective;
  plan.throughput_tokens_per_s = e.latency_s > 0 ? double(w.batch) * w.osl / e.latency_s : 0;
  const auto bits_of = [&](int unit) { return shape.bits[std::size_t(best.assignment.bit[std::size_t(unit)])]; };
  for (int u = 0; u < problem.units(); ++u)
    for (int l = 0; l < shape.group_size; ++l)
      plan.layer_bits.push_back(bits_of(u));
  for (int j = 0; j < problem.stage_count(); ++j) {
    const StageSlot slot = best.candidate->order[std::size_t(j)];
    const auto& group = cluster.groups[std::size_t(slot.group)];
    StagePlan s;
    s.gpu = group.gpu;
    s.node = group.node;
    s.tp = slot.tp;
    s.first_layer = -1;
    for (int u = 0; u < problem.units(); ++u)
      if (best.assignment.stage[std::size_t(u)] == j) {
        if (s.first_layer < 0)
          s.first_layer = u * shape.group_size;
        s.end_layer = (u + 1) * shape.group_size;
        s.sources |= costs.prefill_layer(group, bits_of(u), plan.prefill_micro_batch, slot.tp).sources;
        s.sources |= costs.decode_layer(group, bits_of(u), plan.decode_micro_batch, slot.tp).sources;
      }
    // Per GPU: 1/tp of the stage's layers and embeddings, and the activations whole.
    s.memory_bytes = (e.stage_bytes[std::size_t(j)] + (j == 0 ? costs.embedding_bytes() : 0.0)) / slot.tp +
                     costs.activation_bytes(plan.prefill_micro_batch);
    s.capacity_bytes = costs.capacity_bytes(group);
    s.prefill_s = e.stage_prefill_s[std::size_t(j)];
    s.decode_s = e.stage_decode_s[std::size_t(j)];
    plan.stages.push_back(s);
  }
}

} // namespace

HeteroPlan
plan_hetero(const LayerCosts& costs, const ClusterSpec& cluster, const std::vector<std::vector<double>>& omega,
            const HeteroOptions& options) {
  const auto shape = search_shape(costs, cluster, options);
  if (omega.size() != std::size_t(costs.model().layers))
    throw std::logic_error("plan_hetero: one indicator row per layer expected");
  check_model_fits(costs, cluster, shape, options);
  HeteroPlan plan;
  const auto started = std::chrono::steady_clock::now();
  auto candidates = placed_candidates(costs, cluster, omega, options, shape, plan);
  const int refined = std::min<int>(static_cast<int>(candidates.size()), std::max(1, options.ilp_candidates));
  if (options.use_ilp)
    refine_with_adabits(candidates, refined);
  plan.heuristic_seconds = seconds_since(started);
  plan.heuristic_objective = candidates.front().objective;
  plan.method = "bitwidth-transfer";
  const Chosen best = options.use_ilp
                          ? solve_leading(candidates, refined, options, plan)
                          : Chosen{&candidates.front(), candidates.front().assignment, candidates.front().objective};
  describe_placement(costs, cluster, shape, best, plan);
  return plan;
}

} // namespace optkit::hetero
