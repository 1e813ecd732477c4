// Solving SplitQuant's problem without the ILP: a greedy start and the bitwidth-transfer local
// search (seed 003 §IV-C "Heuristic"; LLM-PQ's llm_pq_heuristic).
#pragma once

#include "hetero/pipeline_problem.hpp"

#include <optional>

namespace optkit::hetero {

// A start without a solver: units split over the stages in proportion to each stage's speed
// (decode time at the highest bitwidth), every unit at the highest bitwidth, then every stage
// over its memory lowered unit by unit, the smallest indicator increase per byte saved first.
// nullopt when no stage split fits even so.
std::optional<Assignment> greedy_start(const PipelineProblem& problem);

// From a feasible start, repeatedly applies the best improving move until none improves:
//  - a transfer: k ∈ {1, 2, 4} units cross the boundary between adjacent stages, re-bitted to each
//    option in turn, the receiving stage then lowered unit by unit until it fits — SplitQuant's
//    memory-neutral conversions (one 16-bit layer for two 8-bit or four 4-bit) are such moves;
//  - one unit's bitwidth raised or lowered one option.
// Every accepted move keeps the solution feasible and lowers the objective.
Assignment bitwidth_transfer(const PipelineProblem& problem, Assignment start);

} // namespace optkit::hetero
