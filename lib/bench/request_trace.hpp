// A request trace to replay (`optkit bench --trace FILE`), in one of three formats:
//  - jsonl: JSON lines, one request each, with `timestamp` (seconds, any origin) and optionally
//    its lengths — `input_tokens`/`output_tokens`, or GuideLLM's `input_length`/`output_length`;
//  - mooncake: Mooncake's (FAST'25) JSON lines — `timestamp` in milliseconds from the first
//    request, `input_length`, `output_length` and `hash_ids`, one id per 512-token block of the
//    prompt (requests whose ids begin alike share that prefix; the last block may be partial);
//  - azure: the Azure LLM inference trace's CSV — a header naming `TIMESTAMP` (a date and time,
//    `2023-11-16 18:17:03.979`), `ContextTokens` and `GeneratedTokens`, in any column order.
// Lengths a row lacks come from the serving profile. `auto` tells them apart by their content: a
// first line that is a CSV header naming TIMESTAMP is azure; a first row with `hash_ids` is mooncake.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace optkit::bench {

enum class TraceFormat { auto_detect, jsonl, mooncake, azure };
// "auto" | "jsonl" | "mooncake" | "azure"; InputError naming the value otherwise.
TraceFormat parse_trace_format(const std::string& name);
std::string to_string(TraceFormat format);
// The format `auto` finds in `text`.
TraceFormat detect_trace_format(const std::string& text);

struct TraceRequest {
  double timestamp = 0;                    // seconds
  std::int64_t input_tokens = 0;           // 0: from the profile
  std::int64_t output_tokens = 0;          // 0: from the profile
  std::vector<std::int64_t> prefix_blocks; // Mooncake's hash_ids (empty: none)
};

// Throws InputError naming file:line and the field on a malformed row.
std::vector<TraceRequest> parse_request_trace(const std::string& text, const std::string& source,
                                              TraceFormat format = TraceFormat::auto_detect);
std::vector<TraceRequest> load_request_trace(const std::filesystem::path& file,
                                             TraceFormat format = TraceFormat::auto_detect);

} // namespace optkit::bench
