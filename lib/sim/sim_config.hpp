// A simulator setup (profiles/sim/*.yaml or a user file): the timing block that prices engine
// steps, the workload and how long a measurement segment runs.
//
//   name: tinyllama-l40s
//   timing: {step_base_ms: 6, prefill_token_us: 40, decode_seq_us: 250, noise_cv: 0.05,
//            draft_step_ms: 1.5, draft_seq_us: 50, verify_token_us: 150, acceptance: 0.6}
//   workload: {arrivals: poisson, rate: 12, prompt_mean: 512, output_mean: 64}
//   segment: {warmup_s: 10, min_duration_s: 90, min_completions: 1500, slo_s: 1.2}
#pragma once

#include "sim/segment.hpp"
#include "sim/serving_simulator.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace optkit::sim {

struct SimSetup {
  std::string name;
  std::string description;
  std::string source;
  SimTiming timing;
  SegmentSpec segment; // its workload included
};

SimSetup parse_sim_setup(const std::string& yaml, const std::string& source);
// A bundled name (profiles/sim/NAME.yaml) or a path.
SimSetup resolve_sim_setup(const std::string& name_or_path);
nlohmann::json to_json(const SimSetup& setup);

} // namespace optkit::sim
