// SLO-Tuner's control loop (seed 002 Algorithm 1) as a proposal sequence: each step measures the
// current configuration K, then every neighbour of K; K moves to the best neighbour K* when
// S(K*) − S(K) ≥ δ, or when K violates the SLO and K* scores higher at all. The history is
// replayed from K0 to find where the loop stands, so the climb needs no state of its own.
// Neighbours: each numeric knob one step up and one down (clamped to its range), each other
// choice of a categorical (the paper's "spec on/off toggle"), conditionals completed by the space.
#include "tune/optimizer.hpp"

#include <algorithm>
#include <cmath>

namespace optkit::tune {

namespace {

class HillClimb final : public Optimizer {
public:
  HillClimb(const SearchSpace& space, const HillClimbOptions& options) : m_space(space), m_options(options) {
    m_start = space.complete(options.start.is_object() ? options.start : nlohmann::json::object());
    space.check(m_start);
  }

  std::optional<nlohmann::json> propose(const std::vector<Observation>& history, int) override {
    nlohmann::json k = m_start;
    std::size_t position = 0;
    for (;;) {
      std::vector<nlohmann::json> batch{k};
      for (auto& n : neighbours(k))
        batch.push_back(std::move(n));
      if (position + batch.size() > history.size())
        return batch[history.size() - position];
      const Observation& current = history[position];
      std::size_t best = position + 1;
      for (std::size_t i = position + 1; i < position + batch.size(); ++i)
        if (history[i].value > history[best].value)
          best = i;
      if (batch.size() > 1) {
        const double gain = history[best].value - current.value;
        if (gain >= m_options.delta || (current.violation > 0 && gain > 0))
          k = batch[best - position];
      }
      position += batch.size();
    }
  }
  std::string name() const override { return "hillclimb"; }

private:
  double step_of(const Parameter& p) const {
    if (const auto it = m_options.steps.find(p.name); it != m_options.steps.end())
      return it->second;
    if (p.neighbor_step)
      return *p.neighbor_step;
    if (p.log)
      return 2.0;
    const double sixth = (p.high - p.low) / 6.0;
    return p.stepped() ? std::max(p.grid_step(), std::round(sixth / p.grid_step()) * p.grid_step()) : sixth;
  }

  std::vector<nlohmann::json> neighbours(const nlohmann::json& k) const {
    std::vector<nlohmann::json> out;
    const auto add = [&](nlohmann::json candidate) {
      candidate = m_space.complete(std::move(candidate));
      if (candidate != k && std::find(out.begin(), out.end(), candidate) == out.end())
        out.push_back(std::move(candidate));
    };
    for (const auto& p : m_space.parameters) {
      if (!k.contains(p.name))
        continue;
      const double x = p.internal(k.at(p.name));
      if (p.kind == ParamKind::categorical) {
        for (std::size_t c = 0; c < p.choices.size(); ++c)
          if (static_cast<double>(c) != x) {
            auto candidate = k;
            candidate[p.name] = p.choices[c];
            add(std::move(candidate));
          }
        continue;
      }
      const double step = step_of(p);
      for (double next : p.log ? std::vector<double>{x / step, x * step} : std::vector<double>{x - step, x + step}) {
        auto candidate = k;
        candidate[p.name] = p.external(std::clamp(next, p.low, p.high));
        add(std::move(candidate));
      }
    }
    return out;
  }

  const SearchSpace& m_space;
  HillClimbOptions m_options;
  nlohmann::json m_start;
};

} // namespace

std::unique_ptr<Optimizer>
make_hill_climb(const SearchSpace& space, const HillClimbOptions& options) {
  return std::make_unique<HillClimb>(space, options);
}

} // namespace optkit::tune
