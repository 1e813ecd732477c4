// How many requests a server says it is running and holding in its queue, read from its
// Prometheus /metrics text: vLLM's vllm:num_requests_running / _waiting, SGLang's
// sglang:num_running_reqs / num_queue_reqs, llama-server's llamacpp:requests_processing /
// requests_deferred and serve-deltas' optkit:num_requests_running / _waiting, each summed over
// its label sets (one per model or engine).
#pragma once

#include <optional>
#include <string_view>

namespace optkit::bench {

struct ServerQueue {
  double running = 0, waiting = 0;
};

// Nothing when the text names none of those gauges; a sample whose value is not a finite count
// (0 to 1e12) is skipped.
std::optional<ServerQueue> parse_server_queue(std::string_view metrics_text);

} // namespace optkit::bench
