// The topologies plan hetero searches (SplitQuant's device-topology reordering, seed 003 §IV-C,
// with its runtime's tensor-parallel stages): an order of the cluster's device groups, each group's
// GPUs split into pipeline stages of tensor-parallel degree 1, 2, 4 or 8; and, for one such layout
// and pair of micro-batch sizes, the pipeline problem the solvers take.
#pragma once

#include "hetero/layer_costs.hpp"
#include "hetero/pipeline_problem.hpp"

#include <string>
#include <vector>

namespace optkit::hetero {

// One pipeline stage: `tp` GPUs of device group `group`, running its layers with tensor
// parallelism of that degree.
struct StageSlot {
  int group = 0;
  int tp = 1;
};
using StageLayout = std::vector<StageSlot>; // the stages in pipeline order

// Every order of the device groups (the GPUs of one group stay together) × every split of each
// group into stages of the degrees LayerCosts allows it (largest first within a group), with at
// most `max_stages` stages.
std::vector<StageLayout> stage_layouts(const LayerCosts& costs, const ClusterSpec& cluster, int max_stages);
// The fewest stages any layout has: each group in stages of its largest degree.
int fewest_stages(const LayerCosts& costs, const ClusterSpec& cluster);

// The decode micro-batch ξ of a layout (given, else ⌈B / stages⌉: LLM-PQ's B / GPUs with a stage
// for a GPU) and the prefill micro-batches η to try (given, else 1, 2, 4, … up to ξ).
struct MicroBatches {
  int xi = 1;
  std::vector<int> etas;
};
MicroBatches micro_batches(int decode_micro_batch, const std::vector<int>& prefill_micro_batches, int batch,
                           int stages);

// The problem for one layout: `omega[layer][bit option]` summed per unit of `group_size` layers;
// each stage's times at its TP degree; its memory as tp GPUs' room (each holds 1/tp of its layers
// and of the first stage's embeddings, and the prefill micro-batch's activations whole).
PipelineProblem build_problem(const LayerCosts& costs, const ClusterSpec& cluster,
                              const std::vector<std::vector<double>>& omega, const std::vector<int>& bits, double theta,
                              const StageLayout& layout, int group_size, int eta, int xi);

// "TP4", "TP2+PP2", "PP4" when every stage is one GPU type at one degree; else each stage:
// "a100_40g TP2 | v100 TP1".
struct GpuStage {
  std::string gpu;
  int tp = 1;
};
std::string topology_text(const std::vector<GpuStage>& stages);
std::string layout_text(const ClusterSpec& cluster, const StageLayout& layout);

} // namespace optkit::hetero
