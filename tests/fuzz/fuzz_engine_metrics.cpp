// libFuzzer target: arbitrary bytes as an engine's /metrics (Prometheus text exposition), read
// for its *_config_info gauges and for the requests it runs and queues (bench's drain check).
// Properties: never crashes; every result is an object of objects of strings; a line that parsed
// gives the same labels when it is the only line; the queue counts are finite and not negative.
#include "bench/server_queue.hpp"
#include "engines/effective_settings.hpp"

#include <cmath>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto info = optkit::engines::config_info_labels(text);
  if (!info.is_object())
    std::abort();
  for (const auto& [name, labels] : info.items()) {
    if (!labels.is_object())
      std::abort();
    for (const auto& [key, value] : labels.items())
      if (!value.is_string() || key.empty())
        std::abort();
  }
  if (const auto queue = optkit::bench::parse_server_queue(text))
    if (!std::isfinite(queue->running) || !std::isfinite(queue->waiting) || queue->running < 0 || queue->waiting < 0)
      std::abort();
  const auto first_line = text.substr(0, text.find('\n'));
  const auto alone = optkit::engines::config_info_labels(first_line);
  for (const auto& [name, labels] : alone.items())
    if (!info.contains(name))
      std::abort(); // (a later line of the same name may replace it, never remove it)
  return 0;
}
