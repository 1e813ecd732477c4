// The OpenAI request and response bodies serve-deltas speaks, as vLLM serves them: parsing with a
// 400-worthy message naming the field for every malformed value, and the JSON of responses and
// stream chunks (role delta first, one finish_reason chunk, the include_usage tail chunk).
#pragma once

#include "serve/engine.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace optkit::serve {

// A request that cannot be served as sent: HTTP 400 with this message.
class BadRequest : public std::runtime_error {
public:
  BadRequest(std::string message, std::string field = {})
      : std::runtime_error(std::move(message)), param(std::move(field)) {}
  std::string param; // the offending field, for the error body
};

// A request body as JSON, in time linear in its size (http/json_body.hpp); BadRequest when it is
// not JSON or nests or repeats past the limits.
nlohmann::ordered_json parse_request_body(const std::string& body);

enum class Endpoint { completions, chat };

struct ApiRequest {
  Endpoint endpoint = Endpoint::completions;
  std::string model; // empty: the base model
  // completions: text or token ids; chat: the messages as sent (rendered by the chat template)
  std::variant<std::string, std::vector<TokenId>> prompt;
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;           // null when absent
  std::optional<std::int64_t> max_tokens; // none: 16 for completions, the rest of the context for chat
  GenerationParams generation;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  bool echo = false; // completions: the prompt's text (and with logprobs its tokens') first
  int n = 1;         // choices: each its own engine request (seeded: seed + index, as vLLM seeds them)
};

// Throws BadRequest naming the field for a value of the wrong type or range, or a feature this
// server does not implement (best_of, suffix), rather than ignoring it.
ApiRequest parse_api_request(Endpoint endpoint, const std::string& body);

struct Usage {
  std::int64_t prompt_tokens = 0, completion_tokens = 0;
  std::optional<std::int64_t> cached_tokens; // prompt_tokens_details.cached_tokens, with prefix caching
};

// One response id and creation time per request, stable across its chunks.
struct ResponseIdentity {
  std::string id;
  std::int64_t created = 0;
  std::string model;
};
ResponseIdentity new_identity(Endpoint endpoint, const std::string& model);

// optkit's own per-request timing (unix seconds): when the request arrived, was first scheduled,
// produced its first token and finished — so a client can tell queueing from compute. Absent
// moments are null. Sent in the final response body and the finish_reason chunk as "timing".
nlohmann::ordered_json timing_json(const StepOutput& last);

// One finished choice of a response: `logprobs` is its value (null when not asked for).
struct ChoiceResult {
  std::string text;
  const char* finish_reason = nullptr;
  nlohmann::ordered_json logprobs;
};
// The choices in index order; `timing` is left out when null.
nlohmann::ordered_json response_body(Endpoint endpoint, const ResponseIdentity& who,
                                     const std::vector<ChoiceResult>& choices, const Usage& usage,
                                     const nlohmann::ordered_json& timing);
// What every chunk of one response starts with, serialized once per response: `{"id":…,
// "object":…,"created":…,"model":…` (the object still open).
std::string chunk_head(Endpoint endpoint, const ResponseIdentity& who);
// The SSE event (`data: {…}\n\n`) of a stream chunk carrying `text` for choice `index` (and, for
// chat, the role on the first); finish_reason null until the last. With include_usage every chunk
// carries "usage": null, as OpenAI documents. `head` is chunk_head's.
std::string stream_event(const std::string& head, Endpoint endpoint, int index, const std::string& text, bool first,
                         const char* finish_reason, bool include_usage,
                         const nlohmann::ordered_json& logprobs = nullptr,
                         const nlohmann::ordered_json& timing = nullptr);
// The event of the usage chunk that ends a stream with include_usage: no choices, the usage.
std::string usage_event(const std::string& head, const Usage& usage);

} // namespace optkit::serve
