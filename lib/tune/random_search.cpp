// Random search, the random-seed helpers every optimizer shares, and grid search.
#include "core/error.hpp"
#include "core/random_source.hpp"
#include "tune/optimizer.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>

namespace optkit::tune {

std::uint64_t
trial_seed(std::uint64_t seed, int number) {
  // splitmix64 of (seed, number): independent streams per trial, the same on every resume.
  const auto trial = static_cast<std::uint64_t>(static_cast<std::uint32_t>(number));
  std::uint64_t z = seed * std::uint64_t{0x9e3779b97f4a7c15} + trial + std::uint64_t{0x632be59bd9b4e019};
  z = (z ^ (z >> 30)) * std::uint64_t{0xbf58476d1ce4e5b9};
  z = (z ^ (z >> 27)) * std::uint64_t{0x94d049bb133111eb};
  return z ^ (z >> 31);
}

nlohmann::json
random_value(const Parameter& p, RandomSource& random) {
  if (p.kind == ParamKind::categorical)
    return p.choices[random.below(p.choices.size())];
  if (p.log) {
    const bool integer = p.kind == ParamKind::integer;
    const double lo = std::log(integer ? p.low - 0.5 : p.low), hi = std::log(integer ? p.high + 0.5 : p.high);
    return p.external(std::exp(random.uniform(lo, hi)));
  }
  if (p.stepped()) {
    const auto points = static_cast<std::uint64_t>(p.grid_count(0));
    return p.external(p.low + static_cast<double>(random.below(points)) * p.grid_step());
  }
  return p.external(random.uniform(p.low, p.high));
}

nlohmann::json
random_configuration(const SearchSpace& space, std::uint64_t seed) {
  RandomSource random(seed);
  nlohmann::json config = nlohmann::json::object();
  for (const auto& p : space.parameters)
    if (space.active(p, config))
      config[p.name] = random_value(p, random);
  return config;
}

namespace {

class RandomSearch final : public Optimizer {
public:
  RandomSearch(const SearchSpace& space, std::uint64_t seed) : m_space(space), m_seed(seed) {}
  std::optional<nlohmann::json> propose(const std::vector<Observation>&, int number) override {
    return random_configuration(m_space, trial_seed(m_seed, number));
  }
  std::string name() const override { return "random"; }

private:
  const SearchSpace& m_space;
  std::uint64_t m_seed;
};

class GridSearch final : public Optimizer {
public:
  GridSearch(const SearchSpace& space, std::size_t float_points) {
    constexpr std::size_t limit = 1'000'000;
    if (space.grid_size(float_points) > limit)
      throw InputError(fmt::format(
          "search space '{}' has more than {} grid points; use tpe or random, or coarser steps", space.name, limit));
    enumerate(space, float_points, 0, nlohmann::json::object());
  }
  // The first point neither measured nor handed out to a trial still running (parallel slots).
  std::optional<nlohmann::json> propose(const std::vector<Observation>& history, int number) override {
    for (const auto& config : m_points) {
      bool seen = false;
      for (const auto& h : history)
        seen = seen || h.config == config;
      for (const auto& [n, issued] : m_issued)
        seen = seen || (n != number && issued == config);
      if (!seen) {
        m_issued[number] = config;
        return config;
      }
    }
    return std::nullopt;
  }
  std::string name() const override { return "grid"; }

private:
  void enumerate(const SearchSpace& space, std::size_t float_points, std::size_t index, nlohmann::json config) {
    if (index == space.parameters.size()) {
      m_points.push_back(std::move(config));
      return;
    }
    const auto& p = space.parameters[index];
    if (!space.active(p, config)) {
      enumerate(space, float_points, index + 1, std::move(config));
      return;
    }
    for (const auto& value : p.grid(float_points)) {
      auto next = config;
      next[p.name] = value;
      enumerate(space, float_points, index + 1, std::move(next));
    }
  }

  std::vector<nlohmann::json> m_points;
  std::map<int, nlohmann::json> m_issued; // trial number → point
};

} // namespace

std::unique_ptr<Optimizer>
make_random_search(const SearchSpace& space, std::uint64_t seed) {
  return std::make_unique<RandomSearch>(space, seed);
}

std::unique_ptr<Optimizer>
make_grid_search(const SearchSpace& space, std::size_t float_points) {
  return std::make_unique<GridSearch>(space, float_points);
}

} // namespace optkit::tune
