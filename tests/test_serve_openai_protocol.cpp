// The stream chunks serve-deltas writes by hand, field by field, against the same chunk built as
// a JSON object and dumped by nlohmann-json: equal byte for byte, for both endpoints, every
// combination of role, text, finish reason, logprobs, usage and timing, and text that needs
// escaping. And the usage chunk likewise.
#include "serve/openai_protocol.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

using namespace optkit;
using namespace optkit::serve;
using json = nlohmann::ordered_json;

namespace {

// The chunk as OpenAI's reference shows it, built as an object.
std::string
chunk_as_object(Endpoint endpoint, const ResponseIdentity& who, int index, const std::string& text, bool first,
                const char* finish_reason, bool include_usage, const json& logprobs, const json& timing) {
  const bool chat = endpoint == Endpoint::chat;
  json out = {{"id", who.id},
              {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", who.created},
              {"model", who.model}};
  json choice = {{"index", index}};
  if (chat) {
    json delta = json::object();
    if (first)
      delta["role"] = "assistant";
    if (!text.empty() || (first && finish_reason == nullptr))
      delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish_reason == nullptr ? json(nullptr) : json(finish_reason);
  out["choices"] = json::array({choice});
  if (include_usage)
    out["usage"] = nullptr;
  if (!timing.is_null())
    out["timing"] = timing;
  return "data: " + out.dump() + "\n\n";
}

} // namespace

TEST_CASE("stream chunks written field by field equal the chunk object's dump") {
  const ResponseIdentity who{"cmpl-\"quoted\"\\id", 1795714437, "code/v1 \u00e9"};
  const std::vector<std::string> texts = {"", " tok", "line\nbreak \"quote\" \\ tab\t", "\u00e9\u4e2d\U0001F600",
                                          std::string("ctrl\x01\x1f", 6)};
  const json logprobs = {{"tokens", {" a"}}, {"token_logprobs", {-0.25}}};
  const json timing = {{"arrival", 1795714437.25}, {"scheduled", nullptr}, {"first_token", 1.5}, {"finished", 2.0}};
  int checked = 0;
  for (const auto endpoint : {Endpoint::completions, Endpoint::chat}) {
    const std::string head = chunk_head(endpoint, who);
    for (const auto& text : texts)
      for (const bool first : {false, true})
        for (const char* finish : {static_cast<const char*>(nullptr), "stop", "length"})
          for (const bool usage : {false, true})
            for (const json* extra : {&logprobs, static_cast<const json*>(nullptr)})
              for (const int index : {0, 3}) {
                const json lp = extra != nullptr ? *extra : json(nullptr);
                const json t = finish != nullptr ? timing : json(nullptr);
                CHECK(stream_event(head, endpoint, index, text, first, finish, usage, lp, t) ==
                      chunk_as_object(endpoint, who, index, text, first, finish, usage, lp, t));
                ++checked;
              }
  }
  CHECK(checked == 2 * 5 * 2 * 3 * 2 * 2 * 2);

  const Usage usage{12, 4, 8};
  for (const auto endpoint : {Endpoint::completions, Endpoint::chat}) {
    json out = {{"id", who.id},
                {"object", endpoint == Endpoint::chat ? "chat.completion.chunk" : "text_completion"},
                {"created", who.created},
                {"model", who.model},
                {"choices", json::array()}};
    out["usage"] = {{"prompt_tokens", 12}, {"total_tokens", 16}, {"completion_tokens", 4}};
    out["usage"]["prompt_tokens_details"] = {{"cached_tokens", 8}};
    CHECK(usage_event(chunk_head(endpoint, who), usage) == "data: " + out.dump() + "\n\n");
  }
}

TEST_CASE("what the server does not implement is a 400 naming the field; values that change nothing pass") {
  const auto param_of = [](Endpoint endpoint, const json& body) -> std::string {
    try {
      parse_api_request(endpoint, body.dump());
      return "(accepted)";
    } catch (const BadRequest& e) {
      return e.param;
    }
  };
  const json chat = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  const json completion = {{"prompt", "hi"}};
  const auto with = [](json body, const char* field, const json& value) {
    body[field] = value;
    return body;
  };
  for (const auto& [field, value] :
       std::vector<std::pair<const char*, json>>{{"response_format", {{"type", "json_object"}}},
                                                 {"guided_json", {{"type", "object"}}},
                                                 {"guided_choice", json::array({"a", "b"})},
                                                 {"structured_outputs", {{"regex", "a+"}}},
                                                 {"prompt_logprobs", 1},
                                                 {"use_beam_search", true}}) {
    const std::string name = field; // a binding cannot be captured (C++20, clang 14)
    CAPTURE(name);
    CHECK(param_of(Endpoint::completions, with(completion, field, value)) == field);
    CHECK(param_of(Endpoint::chat, with(chat, field, value)) == field);
  }
  for (const auto& [field, value] :
       std::vector<std::pair<const char*, json>>{{"tool_choice", "required"},
                                                 {"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}},
                                                 {"chat_template", "{{ messages }}"},
                                                 {"chat_template_kwargs", {{"enable_thinking", false}}},
                                                 {"echo", true},
                                                 {"add_generation_prompt", false}}) {
    const std::string name = field; // a binding cannot be captured (C++20, clang 14)
    CAPTURE(name);
    CHECK(param_of(Endpoint::chat, with(chat, field, value)) == field);
  }
  CHECK(param_of(Endpoint::completions, with(completion, "suffix", "x")) == "suffix");
  CHECK(param_of(Endpoint::completions, with(completion, "best_of", 2)) == "best_of");
  // Values that ask for what the server does anyway.
  CHECK(param_of(Endpoint::chat, with(with(chat, "response_format", {{"type", "text"}}), "tool_choice", "auto")) ==
        "(accepted)");
  CHECK(param_of(Endpoint::chat, with(chat, "echo", false)) == "(accepted)");
  CHECK(param_of(Endpoint::completions, with(completion, "best_of", 1)) == "(accepted)");
  // Images, audio and files in a message: refused; text parts pass.
  json parts = chat;
  parts["messages"][0]["content"] = json::array({{{"type", "text"}, {"text", "hi"}}});
  CHECK(param_of(Endpoint::chat, parts) == "(accepted)");
  parts["messages"][0]["content"].push_back({{"type", "image_url"}, {"image_url", {{"url", "data:,"}}}});
  CHECK(param_of(Endpoint::chat, parts) == "messages");
}
