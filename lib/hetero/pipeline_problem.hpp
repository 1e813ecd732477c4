// SplitQuant's optimisation problem (seed 003 §IV-C, objective (4)) for one device order and
// one pair of micro-batch sizes, in plain numbers: units (decoder layers, or groups of adjacent
// layers) placed in order on stages (one GPU each) at one bitwidth each, stages contiguous and
// every stage used. The objective is the batch's pipeline latency plus θ · the quality indicator:
//   latency = T_pre + (μ_pre − 1)·T^pre_max + (n − 1)·(T_dec + (μ_dec − 1)·T^dec_max)
// where T_pre, T_dec sum the stages' compute and T^·_max bounds every stage's compute and its
// hand-off to the next stage (communication overlaps compute, constraint (7)). The printed
// objective (4) multiplies only the T^dec_max term by (n − 1); that undercounts decode when
// μ_dec = 1, so every one of the n − 1 decode rounds is counted whole here.
#pragma once

#include <string>
#include <vector>

namespace optkit::hetero {

struct StageCosts {
  std::vector<double> prefill_s; // one unit's compute for one prefill micro-batch, per bit option
  std::vector<double> decode_s;  // one unit's compute for one decode step of a micro-batch
  double fixed_prefill_s = 0;    // pre/post-processing (the first stage only)
  double fixed_decode_s = 0;
  double transfer_prefill_s = 0; // hand-off to the next stage (the last: back to the first)
  double transfer_decode_s = 0;
  double capacity_bytes = 0; // for the units (embeddings and activations already taken off)
};

struct PipelineProblem {
  std::vector<int> bits;                       // the bit options, ascending
  std::vector<std::vector<double>> unit_bytes; // [unit][bit]: weights + KV cache
  std::vector<std::vector<double>> omega;      // [unit][bit]: the quality indicator
  std::vector<StageCosts> stages;
  double prefill_micro_batches = 1; // μ_pre = ⌈B/η⌉
  double decode_micro_batches = 1;  // μ_dec = ⌈B/ξ⌉
  double decode_rounds = 0;         // n − 1
  double theta = 0;                 // seconds of latency one unit of indicator is worth

  int units() const { return static_cast<int>(unit_bytes.size()); }
  int stage_count() const { return static_cast<int>(stages.size()); }
};

// A solution: the stage and the bit option (an index into bits) of every unit.
struct Assignment {
  std::vector<int> stage;
  std::vector<int> bit;
};

struct Evaluation {
  bool feasible = false;
  std::string why; // when not feasible
  double latency_s = 0;
  double indicator = 0;
  double objective = 0;
  std::vector<double> stage_prefill_s, stage_decode_s, stage_bytes;
};

// Checks contiguity (stages non-decreasing along the units, every stage used) and memory.
Evaluation evaluate(const PipelineProblem& problem, const Assignment& assignment);

} // namespace optkit::hetero
