// SplitQuant's planner (seed 003 §IV-C): for each layout of the cluster (an order of its device
// groups, and each group's GPUs split into pipeline stages of tensor-parallel degree 1, 2, 4 or 8)
// and each prefill micro-batch size, the problem is solved by bitwidth transfer from an
// accuracy-only (adabits) start; the most promising candidates are then solved exactly by the ILP
// with CBC, started from the heuristic's solution, within the time limit. The best feasible plan
// wins; a plan that does not fit is never returned.
#pragma once

#include "hetero/cluster_spec.hpp"
#include "hetero/layer_costs.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace optkit::hetero {

struct HeteroOptions {
  std::vector<int> bits = {3, 4, 8, 16};
  // Seconds of batch latency the quality indicator's full scale is worth: the indicator is
  // normalised so that every layer at the lowest bitwidth sums to 1.
  double theta = 10;
  int group_size = 0;                     // adjacent layers decided together (0: the smallest making ≤ 40 units)
  double time_limit_s = 10;               // the ILP's budget over all its solves
  bool use_ilp = true;                    // false: bitwidth transfer only
  int ilp_candidates = 3;                 // candidates (order × micro-batch) the ILP refines
  int decode_micro_batch = 0;             // ξ (0: ⌈B / stages⌉, LLM-PQ's B / GPUs with a GPU a stage)
  std::vector<int> prefill_micro_batches; // η candidates (empty: 1, 2, 4, … up to ξ)
};

struct StagePlan {
  std::string gpu;
  std::string node;
  int tp = 1; // GPUs of the stage, one tensor-parallel group
  int first_layer = 0;
  int end_layer = 0;         // exclusive
  double memory_bytes = 0;   // per GPU: weights, KV cache, activations, embeddings (first stage)
  double capacity_bytes = 0; // per GPU: its memory less the engine's reserve
  double prefill_s = 0;      // one prefill micro-batch through the stage
  double decode_s = 0;       // one decode step of a micro-batch through the stage
  std::uint8_t sources = 0;  // perf database labels behind the times
};

struct HeteroPlan {
  std::vector<StagePlan> stages;
  std::vector<int> layer_bits;
  int prefill_micro_batch = 0;
  int decode_micro_batch = 0;
  int group_size = 1;
  double latency_s = 0;               // the batch: prefill, then osl − 1 decode rounds
  double throughput_tokens_per_s = 0; // batch × osl / latency
  double indicator = 0;               // normalised: 1 = every layer at the lowest bitwidth
  double objective = 0;
  std::string method; // "ilp", "bitwidth-transfer" or "greedy"
  bool proven_optimal = false;
  double gap = 0;                 // the ILP's relative optimality gap when it stopped early
  double heuristic_objective = 0; // bitwidth transfer's best, for comparison
  double heuristic_seconds = 0;
  double ilp_seconds = 0;
  int candidates = 0; // orders × micro-batch sizes evaluated
  int ilp_solves = 0;
};

// `omega[layer][bit option]`: the indicator per decoder layer. GoalNotMet when the cluster cannot
// hold the model even at the lowest bitwidth (saying how much memory is missing).
HeteroPlan plan_hetero(const LayerCosts& costs, const ClusterSpec& cluster,
                       const std::vector<std::vector<double>>& omega, const HeteroOptions& options);

} // namespace optkit::hetero
