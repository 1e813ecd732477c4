// A request trace to replay (`optkit bench --trace FILE`): JSON lines, one request each, with
// `timestamp` (seconds, any origin) and optionally its lengths — `input_tokens`/`output_tokens`,
// or GuideLLM's trace columns `input_length`/`output_length`. Lengths a row lacks come from the
// serving profile.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace optkit::bench {

struct TraceRequest {
  double timestamp = 0;
  std::int64_t input_tokens = 0;  // 0: from the profile
  std::int64_t output_tokens = 0; // 0: from the profile
};

// Throws InputError naming file:line and the field on a malformed row.
std::vector<TraceRequest> parse_request_trace(const std::string& text, const std::string& source);
std::vector<TraceRequest> load_request_trace(const std::filesystem::path& file);

} // namespace optkit::bench
