// What proposes the next configuration of a study. Every optimizer is a function of the space,
// the completed history, the trial number and the random seed, so a study resumed from the archive
// proposes exactly what the uninterrupted one would have. (Grid search also remembers the points
// it handed to trials still running, so parallel slots do not measure one point twice.)
#pragma once

#include "core/random_source.hpp"
#include "tune/search_space.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace optkit::tune {

// A completed trial as the optimizers see it.
struct Observation {
  int number = 0;
  nlohmann::json config;
  double value = 0;     // the objective, larger is better
  double violation = 0; // > 0: infeasible (SLO missed, launch failed); smaller is less bad
};

class Optimizer {
public:
  virtual ~Optimizer() = default;
  // The configuration for trial `number`; nullopt when the optimizer has nothing left to try
  // (a finished grid). `history` holds the completed trials, oldest first.
  virtual std::optional<nlohmann::json> propose(const std::vector<Observation>& history, int number) = 0;
  // Whether trial `number` can be proposed before the trials still running report (parallel
  // slots): always for model-based and random search; hill-climb must see a whole step first.
  virtual bool ready(const std::vector<Observation>& history, int number) const {
    (void)history;
    (void)number;
    return true;
  }
  virtual std::string name() const = 0;
};

struct TpeOptions {
  int startup_trials = 10; // n_startup_trials: random configurations before the model
  int ei_candidates = 24;  // n_ei_candidates
  double gamma = 0.1;      // below-group share: min(⌈gamma·n⌉, gamma_cap)
  int gamma_cap = 25;
  double prior_weight = 1.0;
  bool magic_clip = true;
  bool endpoints = false;
};

struct HillClimbOptions {
  nlohmann::json start; // K0 (empty: each parameter's default, else its midpoint / first choice)
  double delta = 0.02;  // δ: the smallest score gain that moves
  // Per-knob neighbour steps (knob → step); others use the space's neighbor_step, else a sixth
  // of the range on the parameter's grid (log-scaled: a factor of 2).
  std::map<std::string, double> steps;
};

// A seeded stream for trial `number` of a study seeded `seed`.
std::uint64_t trial_seed(std::uint64_t seed, int number);

// One parameter's value drawn uniformly (log-uniformly when log-scaled; stepped ones on their grid).
nlohmann::json random_value(const Parameter& parameter, RandomSource& random);
// A configuration drawn uniformly (log-uniformly for log parameters) from the space.
nlohmann::json random_configuration(const SearchSpace& space, std::uint64_t seed);

std::unique_ptr<Optimizer> make_random_search(const SearchSpace& space, std::uint64_t seed);
// Every point of the product grid once, in order (continuous floats at `float_points` points).
std::unique_ptr<Optimizer> make_grid_search(const SearchSpace& space, std::size_t float_points);
std::unique_ptr<Optimizer> make_tpe(const SearchSpace& space, const TpeOptions& options, std::uint64_t seed);
std::unique_ptr<Optimizer> make_hill_climb(const SearchSpace& space, const HillClimbOptions& options);

} // namespace optkit::tune
