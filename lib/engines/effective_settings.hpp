// An engine's effective settings, read back after launch rather than assumed from the flags it
// was given: optkit serve-deltas reports them (defaults resolved) under "engine" in GET /version;
// vLLM exposes its resolved configuration as Prometheus info gauges on /metrics, e.g.
//   vllm:cache_config_info{block_size="16",gpu_memory_utilization="0.9",num_gpu_blocks="27000"} 1.0
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

namespace optkit::engines {

// The "engine" object of a /version body; null when there is none.
nlohmann::json effective_from_version(const nlohmann::json& version_body);

// llama-server's GET /props: its build ("b6200-abc1234", as its version) and the settings it
// resolved (total_slots, each slot's context n_ctx); null when the body has neither.
nlohmann::json llamacpp_version(const nlohmann::json& props_body);
nlohmann::json effective_from_props(const nlohmann::json& props_body);

// Every sample named *_config_info in Prometheus text exposition, as name → {label: value}
// (values stay strings, as Prometheus labels are). Malformed lines are skipped.
nlohmann::json config_info_labels(std::string_view prometheus_text);

} // namespace optkit::engines
