// optkit's TPE side of the Optuna conformance test (optuna_tpe.py holds Optuna's side):
//   tpe_cases parzen            reads {"parameter": {...}, "observations": [...], "queries": [...]}
//                               on stdin, prints the estimator's mus, sigmas, weights and log_pdf
//   tpe_cases study FUNCTION OPTIMIZER SEEDS TRIALS
//                               prints {"seed": [objective of each trial], ...} for seeds 0..SEEDS-1
// The benchmark functions are defined identically in optuna_tpe.py; both minimise them.
#include "tune/optimizer.hpp"
#include "tune/parzen_estimator.hpp"
#include "tune/search_space.hpp"

#include <cmath>
#include <iostream>
#include <iterator>
#include <numbers>
#include <string>

using namespace optkit::tune;

namespace {

const char*
space_yaml(const std::string& function) {
  if (function == "sphere")
    return "name: sphere\nparameters:\n  - {name: x, type: float, low: -5, high: 5}\n"
           "  - {name: y, type: float, low: -5, high: 5}\n";
  if (function == "branin")
    return "name: branin\nparameters:\n  - {name: x, type: float, low: -5, high: 10}\n"
           "  - {name: y, type: float, low: 0, high: 15}\n";
  if (function == "mixed")
    return "name: mixed\nparameters:\n  - {name: n, type: int, low: 1, high: 1024, log: true}\n"
           "  - {name: c, type: categorical, choices: [a, b, c]}\n"
           "  - {name: z, type: float, low: 0, high: 1, step: 0.05}\n"
           "  - {name: k, type: int, low: 0, high: 20}\n";
  throw std::runtime_error("unknown function " + function);
}

double
objective(const std::string& function, const nlohmann::json& c) {
  if (function == "sphere") {
    const double x = c["x"], y = c["y"];
    return x * x + y * y;
  }
  if (function == "branin") {
    const double x = c["x"], y = c["y"];
    const double pi = std::numbers::pi;
    const double b = 5.1 / (4 * pi * pi), cc = 5 / pi, t = 1 / (8 * pi);
    return std::pow(y - b * x * x + cc * x - 6, 2) + 10 * (1 - t) * std::cos(x) + 10;
  }
  const double n = c["n"].get<double>(), z = c["z"], k = c["k"].get<double>();
  const std::string cat = c["c"];
  const double penalty = cat == "a" ? 1.0 : cat == "b" ? 0.0 : 0.5;
  return std::pow(std::log2(n) - 6, 2) / 4 + penalty + 10 * (z - 0.35) * (z - 0.35) + std::abs(k - 13) / 5;
}

Parameter
parameter_from(const nlohmann::json& spec) {
  std::string yaml = "name: p\nparameters:\n  - " + spec.dump() + "\n";
  static SearchSpace keep; // the Parameter must outlive the estimator
  keep = parse_search_space(yaml, "<parzen case>");
  return keep.parameters.front();
}

} // namespace

int
main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "parzen") {
    const auto input = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(std::cin), {}));
    const Parameter p = parameter_from(input["parameter"]);
    std::vector<double> observations;
    for (const auto& o : input["observations"])
      observations.push_back(p.internal(o));
    const ParzenEstimator estimator(p, observations, ParzenOptions{});
    nlohmann::json out = {{"weights", estimator.weights()}, {"mus", estimator.mus()}, {"sigmas", estimator.sigmas()}};
    for (const auto& q : input["queries"])
      out["log_pdf"].push_back(estimator.log_pdf(p.internal(q)));
    std::cout << out.dump() << "\n";
    return 0;
  }
  if (mode == "study" && argc == 6) {
    const std::string function = argv[2], optimizer = argv[3];
    const int seeds = std::stoi(argv[4]), trials = std::stoi(argv[5]);
    const SearchSpace space = parse_search_space(space_yaml(function), function);
    nlohmann::json out = nlohmann::json::object();
    for (int seed = 0; seed < seeds; ++seed) {
      auto opt = optimizer == "tpe" ? make_tpe(space, TpeOptions{}, static_cast<std::uint64_t>(seed))
                                    : make_random_search(space, static_cast<std::uint64_t>(seed));
      std::vector<Observation> history;
      for (int t = 0; t < trials; ++t) {
        const auto config = *opt->propose(history, t);
        const double f = objective(function, config);
        history.push_back({t, config, -f, 0.0}); // optkit maximises; the functions are minimised
        out[std::to_string(seed)].push_back(f);
      }
    }
    std::cout << out.dump() << "\n";
    return 0;
  }
  std::cerr << "usage: tpe_cases parzen < case.json | tpe_cases study FUNCTION tpe|random SEEDS TRIALS\n";
  return 2;
}
