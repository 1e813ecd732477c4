#include "serve/openai_protocol.hpp"

#include "http/json_body.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

namespace optkit::serve {

namespace {

using json = nlohmann::ordered_json;

const char*
type_name(const json& v) {
  return v.is_null()      ? "null"
         : v.is_boolean() ? "boolean"
         : v.is_number()  ? "number"
         : v.is_string()  ? "string"
         : v.is_array()   ? "array"
                          : "object";
}

[[noreturn]] void
wrong_type(const std::string& field, const char* expected, const json& v) {
  throw BadRequest("'" + field + "' must be " + expected + ", got " + type_name(v), field);
}

double
number(const json& body, const std::string& field, double fallback, double low, double high) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null())
    return fallback;
  if (!it->is_number())
    wrong_type(field, "a number", *it);
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < low || v > high)
    throw BadRequest("'" + field + "' must be between " + json(low).dump() + " and " + json(high).dump() + ", got " +
                         it->dump(),
                     field);
  return v;
}

std::optional<std::int64_t>
integer(const json& body, const std::string& field, std::int64_t low, std::int64_t high) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null())
    return std::nullopt;
  const auto out_of_range = [&] {
    return BadRequest("'" + field + "' must be between " + std::to_string(low) + " and " + std::to_string(high) +
                          ", got " + it->dump(),
                      field);
  };
  // Integers read as integers (a 64-bit seed loses digits through a double); a float only when
  // it is whole and safely inside the range.
  if (it->is_number_unsigned()) {
    const auto v = it->get<std::uint64_t>(); // nlohmann reads every non-negative integer as unsigned
    if (high < 0 || v > static_cast<std::uint64_t>(high) || static_cast<std::int64_t>(v) < low)
      throw out_of_range();
    return static_cast<std::int64_t>(v);
  }
  if (it->is_number_integer()) {
    const auto v = it->get<std::int64_t>();
    if (v < low || v > high)
      throw out_of_range();
    return v;
  }
  if (!it->is_number_float() || std::floor(it->get<double>()) != it->get<double>())
    wrong_type(field, "an integer", *it);
  const double v = it->get<double>();
  if (!(v >= static_cast<double>(low) && v <= static_cast<double>(high) && std::fabs(v) < 9e18))
    throw out_of_range();
  return static_cast<std::int64_t>(v);
}

bool
boolean(const json& body, const std::string& field, bool fallback) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null())
    return fallback;
  if (!it->is_boolean())
    wrong_type(field, "true or false", *it);
  return it->get<bool>();
}

// A feature left out is refused by name rather than silently ignored; a value that asks for what
// the server does anyway (`harmless`) passes.
void
refuse_unless(const json& body, const std::string& field, std::initializer_list<json> harmless = {}) {
  const auto it = body.find(field);
  if (it != body.end() && !it->is_null() && std::find(harmless.begin(), harmless.end(), *it) == harmless.end())
    throw BadRequest("'" + field + "' is not supported by optkit serve-deltas yet; leave it out", field);
}

// Fields of the OpenAI API and of vLLM's extensions that change what is generated, which this
// server does not implement, with the values that change nothing.
void
refuse_unsupported(const json& body, Endpoint endpoint) {
  for (const char* field :
       {"guided_json", "guided_regex", "guided_choice", "guided_grammar", "guided_whitespace_pattern",
        "structured_outputs", "prompt_logprobs", "prediction", "audio", "reasoning_effort", "web_search_options",
        "functions", "function_call", "logits_processors", "bad_words", "allowed_token_ids", "truncate_prompt_tokens"})
    refuse_unless(body, field);
  refuse_unless(body, "response_format", {json{{"type", "text"}}});
  refuse_unless(body, "use_beam_search", {false});
  refuse_unless(body, "length_penalty", {1, 1.0});
  if (endpoint == Endpoint::completions) {
    refuse_unless(body, "suffix");
    refuse_unless(body, "best_of", {1});
    return;
  }
  refuse_unless(body, "tool_choice", {"none", "auto"});
  refuse_unless(body, "echo", {false});
  refuse_unless(body, "add_generation_prompt", {true});
  refuse_unless(body, "continue_final_message", {false});
  refuse_unless(body, "modalities", {json::array({"text"})});
  for (const char* field : {"chat_template", "chat_template_kwargs", "documents"})
    refuse_unless(body, field);
}

// A message's content: a string, or a list of text parts (images, audio and files are not read).
void
check_content_parts(const json& message) {
  const auto content = message.find("content");
  if (content == message.end() || !content->is_array())
    return;
  for (const auto& part : *content) {
    const auto type = part.is_object() ? part.find("type") : part.end();
    if (!part.is_object() || type == part.end() || *type != "text")
      throw BadRequest("'messages' holds a content part of type " +
                           (part.is_object() && type != part.end() ? type->dump() : std::string("(none)")) +
                           "; this server reads text parts only",
                       "messages");
  }
}

std::vector<TokenId>
token_ids(const json& v, const std::string& field) {
  std::vector<TokenId> ids;
  for (const auto& t : v) {
    if (!t.is_number_integer())
      throw BadRequest("'" + field + "' must be a string or a list of token ids, found " + std::string(type_name(t)) +
                           " in the list",
                       field);
    const auto id = t.get<std::int64_t>();
    if (id < 0 || id > INT32_MAX)
      throw BadRequest("'" + field + "' holds token id " + std::to_string(id) + ", outside the vocabulary", field);
    ids.push_back(static_cast<TokenId>(id));
  }
  return ids;
}

} // namespace

nlohmann::ordered_json
parse_request_body(const std::string& body) {
  try {
    return http::parse_json_body(body);
  } catch (const http::JsonBodyError& e) { // not JSON, a number like 1E400, or past a limit
    throw BadRequest(std::string("the body is not valid JSON: ") + e.what());
  }
}

ApiRequest
parse_api_request(Endpoint endpoint, const std::string& text) {
  const json body = parse_request_body(text);
  if (!body.is_object())
    throw BadRequest(std::string("the body must be a JSON object, got ") + type_name(body));
  refuse_unsupported(body, endpoint);
  ApiRequest r;
  r.endpoint = endpoint;
  if (const auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string())
      wrong_type("model", "a string", *it);
    r.model = it->get<std::string>();
  }
  if (endpoint == Endpoint::completions) {
    const auto it = body.find("prompt");
    if (it == body.end() || it->is_null())
      throw BadRequest("'prompt' is required", "prompt");
    if (it->is_string()) {
      r.prompt = it->get<std::string>();
    } else if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
      r.prompt = (*it)[0].get<std::string>();
    } else if (it->is_array() && it->size() == 1 && (*it)[0].is_array()) {
      r.prompt = token_ids((*it)[0], "prompt");
    } else if (it->is_array() && !it->empty() && (*it)[0].is_string()) {
      throw BadRequest("'prompt' lists several prompts; send one request per prompt", "prompt");
    } else if (it->is_array()) {
      r.prompt = token_ids(*it, "prompt");
    } else {
      wrong_type("prompt", "a string or a list of token ids", *it);
    }
    r.max_tokens = integer(body, "max_tokens", 1, INT32_MAX);
    if (!r.max_tokens)
      r.max_tokens = 16; // the OpenAI completions default vLLM keeps
    r.echo = boolean(body, "echo", false);
    // vLLM's default max_logprobs is 20; lm-eval asks for 1.
    if (const auto n = integer(body, "logprobs", 0, 20)) {
      r.generation.logprobs = static_cast<int>(*n);
      r.generation.prompt_logprobs = r.echo;
    }
  } else {
    const auto it = body.find("messages");
    if (it == body.end() || !it->is_array() || it->empty())
      throw BadRequest("'messages' must be a non-empty list of {role, content}", "messages");
    for (const auto& m : *it)
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
        throw BadRequest("each of 'messages' needs a string 'role'", "messages");
    for (const auto& m : *it)
      check_content_parts(m);
    r.messages = *it;
    if (const auto tools = body.find("tools"); tools != body.end() && !tools->is_null())
      r.tools = *tools;
    r.max_tokens = integer(body, "max_completion_tokens", 1, INT32_MAX);
    if (!r.max_tokens)
      r.max_tokens = integer(body, "max_tokens", 1, INT32_MAX);
    const bool logprobs = boolean(body, "logprobs", false);
    const auto top = integer(body, "top_logprobs", 0, 20);
    if (top && !logprobs)
      throw BadRequest("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    if (logprobs)
      r.generation.logprobs = static_cast<int>(top.value_or(0));
  }
  r.n = static_cast<int>(integer(body, "n", 1, 128).value_or(1)); // OpenAI's limit

  auto& g = r.generation;
  if (const auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
    if (!it->is_object())
      wrong_type("logit_bias", "an object of token id to bias", *it);
    for (const auto& [key, value] : it->items()) {
      const bool digits = !key.empty() && key.size() <= 10 &&
                          std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
      const long long id = digits ? std::stoll(key) : -1;
      if (id < 0 || id > INT32_MAX)
        throw BadRequest("'logit_bias' keys are token ids, got \"" + key + "\"", "logit_bias");
      if (!value.is_number() || !std::isfinite(value.get<double>()) || std::fabs(value.get<double>()) > 100.0)
        throw BadRequest("'logit_bias' values are numbers from -100 to 100, got " + value.dump() + " for token " + key,
                         "logit_bias");
      g.logit_bias.emplace_back(static_cast<TokenId>(id), value.get<float>());
    }
  }
  g.penalties.presence = static_cast<float>(number(body, "presence_penalty", 0.0, -2.0, 2.0));
  g.penalties.frequency = static_cast<float>(number(body, "frequency_penalty", 0.0, -2.0, 2.0));
  // vLLM's range: (0, 2]
  g.penalties.repetition = static_cast<float>(number(body, "repetition_penalty", 1.0, 1e-6, 2.0));
  g.sampling.temperature = static_cast<float>(number(body, "temperature", 1.0, 0.0, 100.0));
  g.sampling.top_p = static_cast<float>(number(body, "top_p", 1.0, 1e-9, 1.0));
  const auto top_k = integer(body, "top_k", -1, INT32_MAX);
  g.sampling.top_k = top_k && *top_k > 0 ? *top_k : 0; // -1 and 0: every token, as vLLM reads them
  g.sampling.min_p = static_cast<float>(number(body, "min_p", 0.0, 0.0, 1.0));
  if (const auto seed = integer(body, "seed", INT64_MIN, INT64_MAX)) {
    g.sampling.seed = static_cast<std::uint64_t>(*seed);
    g.seeded = true;
  }
  g.ignore_eos = boolean(body, "ignore_eos", false);
  g.min_tokens = integer(body, "min_tokens", 0, INT32_MAX).value_or(0);
  if (const auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      r.stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const auto& s : *it) {
        if (!s.is_string())
          wrong_type("stop", "a string or a list of strings", *it);
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      wrong_type("stop", "a string or a list of strings", *it);
    }
  }
  if (const auto it = body.find("stop_token_ids"); it != body.end() && !it->is_null()) {
    if (!it->is_array())
      wrong_type("stop_token_ids", "a list of token ids", *it);
    g.stop_token_ids = token_ids(*it, "stop_token_ids");
  }
  r.stream = boolean(body, "stream", false);
  if (const auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object())
      wrong_type("stream_options", "an object", *it);
    r.include_usage = boolean(*it, "include_usage", false);
  }
  return r;
}

ResponseIdentity
new_identity(Endpoint endpoint, const std::string& model) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  ResponseIdentity who;
  who.id = std::string(endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-") + hex;
  who.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  who.model = model;
  return who;
}

namespace {

json
usage_json(const Usage& usage) {
  json out = {{"prompt_tokens", usage.prompt_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
              {"completion_tokens", usage.completion_tokens}};
  if (usage.cached_tokens)
    out["prompt_tokens_details"] = {{"cached_tokens", *usage.cached_tokens}};
  return out;
}

json
head(const ResponseIdentity& who, const char* object) {
  return {{"id", who.id}, {"object", object}, {"created", who.created}, {"model", who.model}};
}

json
reason(const char* finish_reason) {
  return finish_reason == nullptr ? json(nullptr) : json(finish_reason);
}

} // namespace

json
timing_json(const StepOutput& last) {
  // The engine's steady clock mapped onto the wall clock at one moment, so the four agree.
  const auto steady_now = Clock::now();
  const double unix_now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const auto at = [&](Clock::time_point t) -> json {
    if (t == Clock::time_point{})
      return nullptr;
    return unix_now - std::chrono::duration<double>(steady_now - t).count();
  };
  return {{"arrival", at(last.arrival)},
          {"scheduled", at(last.scheduled)},
          {"first_token", at(last.first_token)},
          {"finished", at(last.finished)}};
}

json
response_body(Endpoint endpoint, const ResponseIdentity& who, const std::vector<ChoiceResult>& choices,
              const Usage& usage, const json& timing) {
  const bool chat = endpoint == Endpoint::chat;
  json out = head(who, chat ? "chat.completion" : "text_completion");
  out["choices"] = json::array();
  for (std::size_t i = 0; i < choices.size(); ++i) {
    json choice = {{"index", i}};
    if (chat)
      choice["message"] = {{"role", "assistant"}, {"content", choices[i].text}};
    else
      choice["text"] = choices[i].text;
    choice["logprobs"] = choices[i].logprobs;
    choice["finish_reason"] = reason(choices[i].finish_reason);
    out["choices"].push_back(std::move(choice));
  }
  out["usage"] = usage_json(usage);
  if (!timing.is_null())
    out["timing"] = timing;
  return out;
}

std::string
chunk_head(Endpoint endpoint, const ResponseIdentity& who) {
  std::string out = head(who, endpoint == Endpoint::chat ? "chat.completion.chunk" : "text_completion").dump();
  out.pop_back(); // the closing brace: the chunk's own fields follow
  return out;
}

std::string
stream_event(const std::string& head, Endpoint endpoint, int index, const std::string& text, bool first,
             const char* finish_reason, bool include_usage, const json& logprobs, const json& timing) {
  // Written field by field in the order a json object of the chunk dumps them (the test holds
  // the two equal): one string built per token instead of a tree of objects.
  std::string out;
  out.reserve(head.size() + text.size() + 128);
  out += "data: ";
  out += head;
  out += R"(,"choices":[{"index":)";
  out += std::to_string(index);
  if (endpoint == Endpoint::chat) {
    out += R"(,"delta":{)";
    if (first)
      out += R"("role":"assistant")";
    if (!text.empty() || (first && finish_reason == nullptr)) {
      out += first ? R"(,"content":)" : R"("content":)";
      out += http::dump_json(json(text));
    }
    out += "}";
  } else {
    out += R"(,"text":)";
    out += http::dump_json(json(text));
  }
  out += R"(,"logprobs":)";
  out += logprobs.is_null() ? std::string("null") : logprobs.dump();
  out += R"(,"finish_reason":)";
  out += finish_reason == nullptr ? std::string("null") : json(finish_reason).dump();
  out += "}]";
  if (include_usage)
    out += R"(,"usage":null)";
  if (!timing.is_null()) {
    out += R"(,"timing":)";
    out += timing.dump();
  }
  out += "}\n\n";
  return out;
}

std::string
usage_event(const std::string& head, const Usage& usage) {
  return "data: " + head + R"(,"choices":[],"usage":)" + usage_json(usage).dump() + "}\n\n";
}

} // namespace optkit::serve
