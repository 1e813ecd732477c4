#include "tune/objective.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace optkit::tune {

ObjectiveKind
parse_objective(const std::string& text) {
  if (text == "goodput")
    return ObjectiveKind::goodput;
  if (text == "certified")
    return ObjectiveKind::certified;
  throw InputError("--objective '" + text + "' is not goodput or certified");
}

std::string
to_string(ObjectiveKind kind) {
  return kind == ObjectiveKind::goodput ? "goodput" : "certified";
}

double
hw_cost(const ObjectiveOptions& options, const nlohmann::json& config) {
  double cost = 0;
  for (const auto& [knob, weight] : options.hw_cost)
    if (config.contains(knob) && config.at(knob).is_number())
      cost += weight * config.at(knob).get<double>();
  return cost;
}

double
goodput_score(const ObjectiveOptions& options, double goodput, double p99, double slo_s, const nlohmann::json& config) {
  return goodput - options.lambda * std::max(0.0, p99 - slo_s) - hw_cost(options, config);
}

} // namespace optkit::tune
