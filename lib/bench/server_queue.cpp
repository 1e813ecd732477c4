#include "bench/server_queue.hpp"

#include <charconv>
#include <cmath>
#include <string>

namespace optkit::bench {

namespace {

struct QueueGauge {
  std::string_view name;
  bool running; // else waiting
};

constexpr QueueGauge kGauges[] = {
    {"vllm:num_requests_running", true},    {"vllm:num_requests_waiting", false},
    {"sglang:num_running_reqs", true},      {"sglang:num_queue_reqs", false},
    {"llamacpp:requests_processing", true}, {"llamacpp:requests_deferred", false},
    {"optkit:num_requests_running", true},  {"optkit:num_requests_waiting", false},
};

// The sample's value: the first field after the name and its labels.
std::optional<double>
sample_value(std::string_view line, std::size_t after_name) {
  std::size_t at = after_name;
  if (at < line.size() && line[at] == '{') {
    const auto close = line.find('}', at);
    if (close == std::string_view::npos)
      return std::nullopt;
    at = close + 1;
  }
  if (at >= line.size() || line[at] != ' ')
    return std::nullopt;
  while (at < line.size() && line[at] == ' ')
    ++at;
  const auto end = line.find(' ', at);
  const std::string text(line.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
  double value = 0;
  const auto [ptr, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || ptr != text.data() + text.size() || !std::isfinite(value) || value < 0 || value > 1e12)
    return std::nullopt;
  return value;
}

} // namespace

std::optional<ServerQueue>
parse_server_queue(std::string_view text) {
  ServerQueue queue;
  bool found = false;
  while (!text.empty()) {
    const auto newline = text.find('\n');
    auto line = text.substr(0, newline);
    if (line.ends_with('\r'))
      line.remove_suffix(1);
    text = newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);
    for (const auto& gauge : kGauges) {
      if (!line.starts_with(gauge.name))
        continue;
      const auto value = sample_value(line, gauge.name.size());
      if (!value)
        continue;
      (gauge.running ? queue.running : queue.waiting) += *value;
      found = true;
    }
  }
  return found ? std::optional(queue) : std::nullopt;
}

} // namespace optkit::bench
