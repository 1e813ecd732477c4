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

TrialOutcome
goodput_outcome(const ObjectiveOptions& options, const GoodputFigures& f, double slo_s, const nlohmann::json& config) {
  TrialOutcome out;
  out.value = goodput_score(options, f.goodput, f.p99, slo_s, config);
  out.violation = std::max(0.0, f.p99 - slo_s) / slo_s;
  out.metrics = {{"goodput", f.goodput},
                 {"p50_s", f.p50},
                 {"p95_s", f.p95},
                 {"p99_s", f.p99},
                 {"slo_s", slo_s},
                 {"throughput", f.throughput},
                 {"attainment", f.attainment}};
  return out;
}

TrialOutcome
certified_outcome(const ObjectiveOptions& options, const bench::Certification& c, int tensor_parallel) {
  TrialOutcome out;
  out.metrics = {{"certified_rate", c.certified_rate},
                 {"lowest_failing", c.lowest_failing},
                 {"certification", bench::to_string(c.status)},
                 {"binding", c.binding},
                 {"bench_trials", c.trials.size()}};
  if (c.status == bench::CertificationStatus::feasible) {
    out.value = c.certified_rate / std::max(1, tensor_parallel);
    return out;
  }
  out.value = options.gate_penalty;
  out.violation = 1;
  out.error = "no certified rate: " + (c.binding.empty() ? c.stop_reason : c.binding);
  return out;
}

} // namespace optkit::tune
