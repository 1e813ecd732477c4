// libFuzzer target: arbitrary bytes as the body of /v1/completions and /v1/chat/completions.
// Properties: parsing either accepts or throws BadRequest (never another exception, a crash or a
// hang), and what it accepts is in range (sampling, penalties, logit_bias, n) — what the engine is
// then handed cannot be invalid; a stream chunk carrying the request's strings parses back to them.
#include "serve/openai_protocol.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int
LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  using optkit::serve::Endpoint;
  const Endpoint endpoint = data[0] % 2 == 0 ? Endpoint::completions : Endpoint::chat;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const auto request = optkit::serve::parse_api_request(endpoint, body);
    const auto& s = request.generation.sampling;
    if (!(s.temperature >= 0) || !(s.top_p > 0 && s.top_p <= 1) || s.top_k < 0 || !(s.min_p >= 0 && s.min_p <= 1))
      __builtin_trap();
    if (request.max_tokens && *request.max_tokens < 1)
      __builtin_trap();
    if (request.generation.min_tokens < 0)
      __builtin_trap();
    if (endpoint == Endpoint::chat && (!request.messages.is_array() || request.messages.empty()))
      __builtin_trap();
    if (request.generation.logprobs < -1 || request.generation.logprobs > 20)
      __builtin_trap();
    if (request.generation.prompt_logprobs && (!request.echo || request.generation.logprobs < 0))
      __builtin_trap();
    if (request.n < 1 || request.n > 128)
      __builtin_trap();
    const auto& p = request.generation.penalties;
    if (!(std::fabs(p.presence) <= 2 && std::fabs(p.frequency) <= 2 && p.repetition > 0 && p.repetition <= 2))
      __builtin_trap();
    for (const auto& [token, bias] : request.generation.logit_bias)
      if (token < 0 || !(std::fabs(bias) <= 100))
        __builtin_trap();
    const auto who = optkit::serve::new_identity(endpoint, request.model);
    (void)optkit::serve::response_body(endpoint, who, {{"text", "stop", nullptr}}, {1, 2}, nullptr).dump();
    // The stream chunk written by hand, with the request's own strings as model and text, is one
    // JSON object carrying them unchanged.
    const std::string event = optkit::serve::stream_event(optkit::serve::chunk_head(endpoint, who), endpoint, 0,
                                                          request.model, true, "stop", request.include_usage);
    if (!event.starts_with("data: ") || !event.ends_with("\n\n"))
      __builtin_trap();
    const auto chunk = nlohmann::ordered_json::parse(event.substr(6, event.size() - 8));
    const auto& choice = chunk.at("choices").at(0);
    if (chunk.at("model") != request.model ||
        (endpoint == Endpoint::chat ? choice.at("delta").value("content", std::string())
                                    : choice.at("text").get<std::string>()) != request.model)
      __builtin_trap();
  } catch (const optkit::serve::BadRequest&) {
  }
  return 0;
}
