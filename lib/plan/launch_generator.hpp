// Launch commands for a chosen configuration, in each engine's own flag names (vLLM `vllm serve`,
// SGLang `sglang.launch_server`, TensorRT-LLM `trtllm-serve` plus its extra LLM-API options
// YAML), one command per worker with its GPUs and port; and a serving profile for `optkit bench`
// that checks the prediction.
#pragma once

#include "perf/memory_model.hpp"
#include "plan/search.hpp"

#include <string>

namespace optkit::plan {

struct LaunchContext {
  std::string model_reference; // HF id for a preset, the folder for a config.json
  std::string system_name;
  const PlanRequest* request = nullptr;
  perf::Engine engine = perf::Engine::vllm;
};

// The Hugging Face repository a preset names ("llama-3.1-70b" → "meta-llama/Llama-3.1-70B-Instruct").
std::string preset_repository(const std::string& preset);

// A shell script (bash) that starts every worker of `row` on one node's GPUs.
std::string launch_script(const PlanRow& row, const LaunchContext& context);

// YAML serving profile: workload, concurrency, request rate, SLOs and the predicted figures.
std::string bench_profile_yaml(const PlanRow& row, const LaunchContext& context, std::int64_t run_id);

} // namespace optkit::plan
