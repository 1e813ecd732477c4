// What a trial scores, larger is better.
//   goodput (SLO-Tuner, seed 002 Eq. 1–3): S(K) = goodput − λ·max(0, p99 − SLO) − hw_cost(K),
//     hw_cost(K) = Σ w_knob·K[knob] (the paper's w: concurrency 0.01, max_num_seqs 0.01,
//     speculative_tokens 0.02), λ = 5; feasible iff p99 ≤ SLO.
//   certified (OptiKit, seed 000 Eq. 2): fitness = certified rate / tensor-parallel size, and
//     λ·penalty with λ = −1000 when the closed-loop gate finds no feasible rate.
// SLO-first: an infeasible trial carries a violation > 0 and never wins (optimizers rank every
// feasible trial above any infeasible one; the winner is chosen among feasible ones only).
#pragma once

#include "bench/certification.hpp"
#include "tune/trial_evaluator.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <string>

namespace optkit::tune {

enum class ObjectiveKind { goodput, certified };
ObjectiveKind parse_objective(const std::string& text); // "goodput" | "certified"
std::string to_string(ObjectiveKind kind);

struct ObjectiveOptions {
  ObjectiveKind kind = ObjectiveKind::goodput;
  double lambda = 5.0; // Eq. 3's SLO penalty weight
  std::map<std::string, double> hw_cost{{"concurrency", 0.01}, {"max_num_seqs", 0.01}, {"speculative_tokens", 0.02}};
  double gate_penalty = -1000; // Eq. 2's λ (slo_penalty = 1 when the gate fails)
};

// Σ w·value over the knobs of `config` that have a weight (non-numeric values count 0).
double hw_cost(const ObjectiveOptions& options, const nlohmann::json& config);
// Eq. 3.
double goodput_score(const ObjectiveOptions& options, double goodput, double p99, double slo_s,
                     const nlohmann::json& config);

// A measured segment's figures, from the simulator or from a live closed-loop trial.
struct GoodputFigures {
  double goodput = 0; // requests meeting the p99 target per second (Eq. 1)
  double p50 = 0, p95 = 0, p99 = 0;
  double throughput = 0;
  double attainment = 0;
};
// Eq. 3's outcome: value S(K), violation = p99 overshoot as a share of the target.
TrialOutcome goodput_outcome(const ObjectiveOptions& options, const GoodputFigures& figures, double slo_s,
                             const nlohmann::json& config);
// Eq. 2's outcome: the certified rate / tensor-parallel size, or the gate penalty (violation 1).
TrialOutcome certified_outcome(const ObjectiveOptions& options, const bench::Certification& certification,
                               int tensor_parallel);

} // namespace optkit::tune
