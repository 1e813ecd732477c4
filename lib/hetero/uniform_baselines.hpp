// The "Uniform" rows of SplitQuant's Table IV beside the plan (seed 003 §VI): every layer at one
// bitwidth — FP16, and the plan's lowest — on the best layout of each topology class, so a user sees
// what the mixed-precision plan buys. Classes: PP (every stage one GPU), TP (one stage of every
// GPU) and TP+PP (the rest). Layers are balanced over the stages by bitwidth transfer with that
// one bitwidth (SplitQuant's "Het" balancing), for every prefill micro-batch the planner tries.
#pragma once

#include "hetero/layer_costs.hpp"

#include <string>
#include <vector>

namespace optkit::hetero {

enum class Topology { pp, tp, tp_pp };
std::string topology_name(Topology topology); // "PP", "TP", "TP+PP"

struct UniformBaseline {
  Topology topology = Topology::pp;
  int bits = 16;
  bool fits = false;  // false: no layout of this class holds the model at these bits
  std::string layout; // "TP2+PP2", or each stage: "a100_40g TP2 | v100 TP1"
  double latency_s = 0;
  double throughput_tokens_per_s = 0;
  double indicator = 0; // the quality indicator of every layer at `bits` (the plan's scale: 1 = all lowest)
};

// Each class at 16 bits and at the lowest of `bits` (one row each when they are the same), in that
// order. `omega[layer][bit option]` is the plan's indicator over `bits`.
std::vector<UniformBaseline> uniform_baselines(const LayerCosts& costs, const ClusterSpec& cluster, int group_size,
                                               const std::vector<int>& bits,
                                               const std::vector<std::vector<double>>& omega, int decode_micro_batch,
                                               const std::vector<int>& prefill_micro_batches);

} // namespace optkit::hetero
