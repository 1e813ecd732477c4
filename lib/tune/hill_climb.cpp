// SLO-Tuner's control loop (seed 002 Algorithm 1) as a proposal sequence: each step measures the
// current configuration K, then every neighbour of K; K moves to the best neighbour K* when
// S(K*) − S(K) ≥ δ, or when K violates the SLO and K* scores higher at all. The history is
// replayed from K0 to find where the loop stands, so the climb needs no state of its own.
// Neighbours: each numeric knob one step up and one down (clamped to its range), each other
// choice of a categorical (the paper's "spec on/off toggle"), conditionals completed by the space.
#include "tune/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace optkit::tune {

namespace {

class HillClimb final : public Optimizer {
public:
  HillClimb(const SearchSpace& space, const HillClimbOptions& options) : m_space(space), m_options(options) {
    m_start = space.complete(options.start.is_object() ? options.start : nlohmann::json::object());
    space.check(m_start);
  }

  std::optional<nlohmann::json> propose(const std::vector<Observation>& history, int number) override {
    return locate(history, number).config;
  }
  bool ready(const std::vector<Observation>& history, int number) const override {
    return locate(history, number).config.has_value();
  }
  std::string name() const override { return "hillclimb"; }

private:
  struct Located {
    std::optional<nlohmann::json> config; // nullopt: the step before `number` is still running
  };

  // Replays the climb over the trials seen (by trial number; running ones may leave gaps) up to
  // the step that holds trial `number`.
  Located locate(const std::vector<Observation>& history, int number) const {
    std::map<int, const Observation*> seen;
    for (const auto& o : history)
      seen[o.number] = &o;
    nlohmann::json k = m_start;
    int position = 0;
    for (;;) {
      std::vector<nlohmann::json> batch{k};
      for (auto& n : neighbours(k))
        batch.push_back(std::move(n));
      const int size = static_cast<int>(batch.size());
      if (number < position + size)
        return {batch[static_cast<std::size_t>(number - position)]};
      for (int i = position; i < position + size; ++i)
        if (!seen.count(i))
          return {std::nullopt};
      const Observation& current = *seen[position];
      int best = position + 1;
      for (int i = position + 1; i < position + size; ++i)
        if (seen[i]->value > seen[best]->value)
          best = i;
      if (size > 1) {
        const double gain = seen[best]->value - current.value;
        if (gain >= m_options.delta || (current.violation > 0 && gain > 0))
          k = batch[static_cast<std::size_t>(best - position)];
      }
      position += size;
    }
  }

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
