// Sends a suite's requests to an OpenAI-compatible endpoint the way lm-eval's local-completions
// and local-chat-completions do — non-streaming, greedy, seeded — with N requests in flight,
// bounded retries with backoff on 429, 5xx and dropped connections, a per-request timeout, and
// the response cache in front. A request that still fails after its retries fails the run: a
// score over the items that happened to answer would not be the suite's score.
#pragma once

#include "eval/response_cache.hpp"
#include "http/client.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace optkit::eval {

struct EndpointTarget {
  http::Url url;         // base URL (no /v1)
  std::string model;     // the name requests send
  http::Headers headers; // Authorization, ...
  std::string identity;  // the cache key's model part
};

struct RequestOptions {
  int concurrency = 8;
  int max_retries = 3;    // lm-eval's default
  double timeout_s = 300; // per request, lm-eval's default
  double backoff_s = 0.5; // first retry's wait; doubles each time
  const ResponseCache* cache = nullptr;
  bool read_cache = true;        // false: ask the server even when cached (a --repeat pass), still store
  std::function<void()> on_done; // after each request (progress)
};

struct Generation {
  std::string text; // choices[0].text or .message.content
  std::string finish_reason;
  long completion_tokens = -1;
  nlohmann::json logprobs; // choices[0].logprobs (null when absent)
  bool cached = false;
  int attempts = 0;
};

// `bodies` are request bodies without "model"; `path` is /v1/completions or /v1/chat/completions.
// InputError for a 4xx other than 429 (quoting the server's message); RuntimeFailure when retries
// run out or the run is interrupted.
std::vector<Generation> generate_all(const EndpointTarget& target, const std::string& path,
                                     const std::vector<nlohmann::json>& bodies, const RequestOptions& options);

// The text of an OpenAI completion or chat completion response body. RuntimeFailure quoting it
// when it has no choices[0].text / choices[0].message.content.
Generation parse_generation(const std::string& body);

} // namespace optkit::eval
