#include "serve/api_server.hpp"

#include "core/error.hpp"
#include "http/json_body.hpp"
#include "serve/logprobs_format.hpp"
#include "serve/openai_protocol.hpp"
#include "serve/text_stream.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <mutex>

namespace optkit::serve {

namespace {

using json = nlohmann::ordered_json;

void
send_json(const std::shared_ptr<http::Exchange>& exchange, int status, const json& body) {
  exchange->respond(status, "application/json", http::dump_json(body));
}

// The OpenAI error body (http::error_body) with the offending field named when there is one.
json
error_json(int status, const std::string& message, const std::string& param = {}) {
  auto body = json::parse(http::error_body(status, message));
  if (!param.empty())
    body["error"]["param"] = param;
  return body;
}

void
send_error(const std::shared_ptr<http::Exchange>& exchange, int status, const std::string& message,
           const std::string& param = {}) {
  send_json(exchange, status, error_json(status, message, param));
}

std::string
sse(const json& data) {
  return "data: " + http::dump_json(data) + "\n\n";
}

// One response in flight: its n choices (OpenAI's n), each an engine request of its own, turned
// into text, chunks and the final body. Everything here runs on the engine thread (the sinks);
// the exchange is thread-safe.
class Generation {
public:
  // With echo, `prompt_text` leads each choice's text and `first_prompt_token` its logprobs.
  Generation(Engine& engine, ServeMetrics& metrics, const model::Tokenizer& tokenizer, ApiRequest request,
             ResponseIdentity who, std::shared_ptr<http::Exchange> exchange, std::string prompt_text,
             TokenId first_prompt_token)
      : m_engine(engine)
      , m_metrics(metrics)
      , m_variant(request.generation.variant)
      , m_request(std::move(request))
      , m_who(std::move(who))
      , m_chunk_head(chunk_head(m_request.endpoint, m_who))
      , m_exchange(std::move(exchange))
      , m_echo(m_request.echo ? std::move(prompt_text) : std::string())
      , m_first_prompt_token(first_prompt_token) {
    for (int i = 0; i < m_request.n; ++i) {
      m_choices.emplace_back(tokenizer, m_request.stop);
      if (m_request.generation.logprobs >= 0)
        m_choices.back().logprobs.emplace(tokenizer, m_request.endpoint);
    }
  }

  void begin_stream() {
    m_exchange->start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
    if (m_request.endpoint == Endpoint::chat) // each choice's role delta comes first
      for (int i = 0; i < m_request.n; ++i)
        m_exchange->send(stream_event(m_chunk_head, m_request.endpoint, i, "", true, nullptr, m_request.include_usage));
  }

  void set_ids(std::vector<RequestId> ids) { m_ids = std::move(ids); }
  // Nothing more is sent (the request was refused after some choices were queued).
  void abandon() { m_failed = true; }

  void on_output(int index, const StepOutput& out) {
    Choice& choice = m_choices[static_cast<std::size_t>(index)];
    if (choice.done)
      return;
    record(choice, out); // each choice is a request to /metrics, those of a failed response too
    if (m_failed)
      return;
    choice.completion_tokens = out.generated_tokens;
    if (index == 0)
      m_cached_tokens = out.cached_tokens;
    m_prompt_tokens = out.prompt_tokens;
    if (out.finish == FinishReason::cancelled || out.finish == FinishReason::error) {
      m_failed = true; // one failed choice fails the response: the others stop
      for (std::size_t i = 0; i < m_ids.size(); ++i)
        if (static_cast<int>(i) != index && !m_choices[i].done)
          m_engine.cancel(m_ids[i]);
      if (m_exchange->cancelled())
        return; // the client is gone: nothing to say
      const std::string message =
          out.finish == FinishReason::error ? "generation failed: " + out.error : "the server is shutting down";
      if (m_request.stream) {
        m_exchange->finish(sse(error_json(out.finish == FinishReason::error ? 500 : 503, message)) +
                           "data: [DONE]\n\n");
      } else {
        send_error(m_exchange, out.finish == FinishReason::error ? 500 : 503, message);
      }
      return;
    }
    std::string text;
    bool stopped = false;
    if (choice.first) { // echo: the prompt's text, and its tokens' logprobs, come first
      choice.first = false;
      text = m_echo;
      if (choice.logprobs && m_request.echo) {
        choice.logprobs->add_unscored(m_first_prompt_token);
        for (const auto& entry : out.prompt_logprobs)
          choice.logprobs->add(entry);
      }
    }
    // A token that ended the request by being EOS or a stop token is not part of the text.
    if (out.token && out.finish != FinishReason::stop) {
      auto piece = choice.text.push(*out.token);
      text += piece.text;
      stopped = piece.stopped;
      if (choice.logprobs && out.logprobs)
        choice.logprobs->add(*out.logprobs);
    }
    const char* finish = nullptr;
    StepOutput last = out;
    if (stopped) {
      finish = "stop";
      m_engine.cancel(m_ids[static_cast<std::size_t>(index)]); // a stop string: freed at the engine's next step
      last.finish = FinishReason::stop;
      last.finished = Clock::now();
      finished(last);
    } else if (out.finish != FinishReason::none) {
      text += choice.text.finish();
      finish = finish_reason_name(out.finish);
    }
    const auto logprobs = [&]() -> json { return choice.logprobs ? choice.logprobs->take() : json(nullptr); };
    if (finish != nullptr) {
      choice.done = true;
      choice.result = {m_echo + choice.text.text(), finish, nullptr};
      ++m_finished;
    }
    const bool all_done = m_finished == m_request.n;
    if (m_request.stream) {
      // Logprobs travel with the text of their tokens; text held back (a possible stop string, an
      // unfinished character) keeps them waiting, and the end flushes both.
      const bool pending = choice.logprobs && !choice.logprobs->empty();
      // What this output adds goes out as one piece: one hand-over to the I/O thread, one write.
      std::string events;
      if (!text.empty() || (finish != nullptr && pending))
        events += stream_event(m_chunk_head, m_request.endpoint, index, text, false, nullptr, m_request.include_usage,
                               pending ? logprobs() : json(nullptr));
      if (finish != nullptr)
        events += stream_event(m_chunk_head, m_request.endpoint, index, "", false, finish, m_request.include_usage,
                               nullptr, timing_json(last));
      if (all_done) {
        if (m_request.include_usage)
          events += usage_event(m_chunk_head, usage());
        events += "data: [DONE]\n\n";
        m_exchange->finish(std::move(events));
      } else if (!events.empty()) {
        m_exchange->send(std::move(events));
      }
    } else if (finish != nullptr) {
      choice.result.logprobs = logprobs();
      if (all_done) {
        std::vector<ChoiceResult> results;
        for (const auto& c : m_choices)
          results.push_back(c.result);
        send_json(m_exchange, 200, response_body(m_request.endpoint, m_who, results, usage(), timing_json(last)));
      }
    }
  }

private:
  struct Choice {
    Choice(const model::Tokenizer& tokenizer, const std::vector<std::string>& stop) : text(tokenizer, stop) {}
    TextStream text;
    std::optional<LogprobsWriter> logprobs;
    ChoiceResult result; // once done, for the final body
    std::int64_t completion_tokens = 0;
    bool first = true, done = false;
    Clock::time_point last_token;
  };

  // The prompt counted once, the completion tokens of every choice, the cache hits of the first.
  Usage usage() const {
    Usage u;
    u.prompt_tokens = m_prompt_tokens;
    u.cached_tokens = m_cached_tokens;
    for (const auto& c : m_choices)
      u.completion_tokens += c.completion_tokens;
    return u;
  }
  // Latencies for /metrics (each choice a request): the gap since the choice's previous token,
  // and at its end TTFT and e2e.
  void record(Choice& choice, const StepOutput& out) {
    if (out.token) {
      const auto now = Clock::now();
      if (choice.last_token != Clock::time_point{})
        m_metrics.inter_token(m_variant, std::chrono::duration<double>(now - choice.last_token).count());
      choice.last_token = now;
    }
    if (out.finish != FinishReason::none)
      finished(out);
  }
  void finished(const StepOutput& last) {
    const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
    const double ttft = last.first_token == Clock::time_point{} ? -1 : seconds(last.first_token - last.arrival);
    m_metrics.request_finished(m_variant, last, ttft, seconds(last.finished - last.arrival));
  }

  Engine& m_engine;
  ServeMetrics& m_metrics;
  std::int32_t m_variant; // for the metrics: -1 the base
  ApiRequest m_request;
  ResponseIdentity m_who;
  std::string m_chunk_head; // chunk_head(): what every stream chunk starts with
  std::shared_ptr<http::Exchange> m_exchange;
  std::string m_echo;
  TokenId m_first_prompt_token;
  std::vector<Choice> m_choices;
  std::vector<RequestId> m_ids; // the choices' engine requests
  int m_finished = 0;
  bool m_failed = false;
  std::int64_t m_prompt_tokens = 0;
  std::optional<std::int64_t> m_cached_tokens;
};

} // namespace

ApiServer::ApiServer(http::ServerOptions http, ApiOptions options)
    : m_options(std::move(options))
    , m_http(std::move(http),
             [this](const http::Request& r, const std::shared_ptr<http::Exchange>& e) { handle(r, e); }) {}

ApiServer::~ApiServer() {
  m_http.stop(std::chrono::milliseconds(0));
}

void
ApiServer::attach(Engine& engine, ServedModel model) {
  m_model = std::move(model);
  m_metrics = std::make_unique<ServeMetrics>(m_model.name);
  for (const auto& v : m_model.variants)
    m_metrics->name_variant(v.id, v.name);
  if (m_model.deltas)
    for (const auto& d : m_model.deltas->list())
      m_metrics->name_variant(d.id, d.name);
  m_engine.store(&engine);
}

std::string
ApiServer::served_names() const {
  std::string names = m_model.name;
  for (const auto& v : m_model.variants)
    names += ", " + v.name;
  if (m_model.deltas)
    for (const auto& d : m_model.deltas->list())
      names += ", " + d.name;
  return names;
}

void
ApiServer::handle(const http::Request& request, const std::shared_ptr<http::Exchange>& exchange) {
  const std::string path = request.path();
  if (path == "/health") {
    if (m_engine.load() == nullptr)
      return send_error(exchange, 503, "the model is still loading");
    return exchange->respond(200, "text/plain", "");
  }
  if (!m_options.api_key.empty() && request.header("authorization") != "Bearer " + m_options.api_key)
    return send_error(exchange, 401, "a valid API key is required: send 'Authorization: Bearer <key>'");
  Engine* engine = m_engine.load();
  if (path == "/version") {
    nlohmann::json body = {{"version", m_options.version}};
    if (engine != nullptr)
      body["engine"] = m_model.settings;
    return send_json(exchange, 200, body);
  }
  if (engine == nullptr)
    return send_error(exchange, 503, "the model is still loading; poll /health");
  const auto method_is = [&](const char* method) {
    if (request.method == method)
      return true;
    send_error(exchange, 405, path + " takes " + method + ", not " + request.method);
    return false;
  };
  try {
    if (path == "/metrics") {
      if (!method_is("GET"))
        return;
      return exchange->respond(200, "text/plain; version=0.0.4; charset=utf-8",
                               m_metrics->render(engine->stats(), m_model.deltas));
    }
    if (path == "/v1/models") {
      if (!method_is("GET"))
        return;
      const auto card = [&](const std::string& id, const std::string& root, const json& parent) {
        return json{{"id", id},
                    {"object", "model"},
                    {"created", 0},
                    {"owned_by", "optkit"},
                    {"root", root},
                    {"parent", parent},
                    {"max_model_len", m_model.max_model_len}};
      };
      json data = json::array({card(m_model.name, m_model.root, nullptr)});
      for (const auto& v : m_model.variants)
        data.push_back(card(v.name, v.root, m_model.name));
      if (m_model.deltas)
        for (const auto& d : m_model.deltas->list())
          data.push_back(card(d.name, d.dir.string(), m_model.name));
      return send_json(exchange, 200, {{"object", "list"}, {"data", data}});
    }
    if (path == "/v1/completions" || path == "/v1/chat/completions") {
      if (!method_is("POST"))
        return;
      return generate(path == "/v1/completions" ? Endpoint::completions : Endpoint::chat, request, exchange);
    }
    if ((path == "/v1/load_lora_adapter" || path == "/v1/unload_lora_adapter") && m_options.adapter_loading.enabled) {
      if (!method_is("POST"))
        return;
      if (!m_model.deltas)
        return send_error(exchange, 400,
                          "this server serves a fixed set of models (--baseline swap or --mock); "
                          "variants cannot be loaded or unloaded");
      return path == "/v1/load_lora_adapter" ? load_adapter(request, exchange) : unload_adapter(request, exchange);
    }
    if (path == "/tokenize" || path == "/detokenize") {
      if (!method_is("POST"))
        return;
      const json body = parse_request_body(request.body);
      if (path == "/tokenize") {
        if (!body.is_object() || !body.contains("prompt") || !body["prompt"].is_string())
          throw BadRequest("'prompt' must be a string", "prompt");
        const bool special = !body.contains("add_special_tokens") || body["add_special_tokens"] == true;
        const auto tokens = m_model.tokenizer->encode(body["prompt"].get<std::string>(), special);
        return send_json(exchange, 200,
                         {{"count", tokens.size()}, {"max_model_len", m_model.max_model_len}, {"tokens", tokens}});
      }
      if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array())
        throw BadRequest("'tokens' must be a list of token ids", "tokens");
      std::vector<std::int32_t> ids;
      for (const auto& t : body["tokens"]) {
        if (!t.is_number_integer() || t.get<std::int64_t>() < 0 ||
            t.get<std::int64_t>() >= m_model.tokenizer->vocab_size())
          throw BadRequest("'tokens' holds " + t.dump() + ", not a token id of this model", "tokens");
        ids.push_back(t.get<std::int32_t>());
      }
      return send_json(exchange, 200, {{"prompt", m_model.tokenizer->decode(ids)}});
    }
    send_error(exchange, 404, "no route " + request.method + " " + path);
  } catch (const BadRequest& e) {
    send_error(exchange, 400, e.what(), e.param);
  }
}

void
ApiServer::generate(Endpoint endpoint, const http::Request& request, const std::shared_ptr<http::Exchange>& exchange) {
  ApiRequest api = parse_api_request(endpoint, request.body);
  std::int32_t variant = -1;
  std::string model_name = m_model.name;
  for (const auto& v : m_model.variants)
    if (api.model == v.name) {
      variant = v.id;
      model_name = v.name;
    }
  const bool base = api.model.empty() || api.model == m_model.name;
  const bool registered = !base && variant < 0 && m_model.deltas;
  if (!base && variant < 0 && !registered)
    return send_error(exchange, 404, "the model '" + api.model + "' does not exist; served: " + served_names(),
                      "model");
  if (registered)
    model_name = api.model;
  std::vector<TokenId> prompt;
  try {
    if (endpoint == Endpoint::chat) {
      if (!m_model.chat_template)
        throw BadRequest("this model has no chat template (tokenizer_config.json chat_template or "
                         "chat_template.jinja); use /v1/completions",
                         "messages");
      const std::string text = model::render_chat(*m_model.chat_template, api.messages, true, api.tools);
      prompt = m_model.tokenizer->encode(text, false); // the template wrote the special tokens
    } else if (const auto* text = std::get_if<std::string>(&api.prompt)) {
      prompt = m_model.tokenizer->encode(*text, true);
    } else {
      prompt = std::get<std::vector<TokenId>>(api.prompt);
    }
  } catch (const InputError& e) {
    throw BadRequest(e.what(), endpoint == Endpoint::chat ? "messages" : "prompt");
  }
  const auto prompt_len = static_cast<std::int64_t>(prompt.size());
  api.generation.max_tokens = api.max_tokens.value_or(std::max<std::int64_t>(1, m_model.max_model_len - prompt_len));
  const auto who = new_identity(endpoint, model_name);
  if (!registered)
    return start(std::move(api), std::move(prompt), who, exchange, variant, {});
  // A delta of the store: counted in flight (never evicted under the request), loaded first when
  // it is on disk — then the request starts on the loader thread.
  DeltaStore* store = m_model.deltas;
  auto pending = std::make_shared<std::pair<ApiRequest, std::vector<TokenId>>>(std::move(api), std::move(prompt));
  try {
    store->acquire(
        pending->first.model, [this, store, pending, who, exchange](std::int32_t id, const std::string& error) {
          if (id < 0)
            return send_error(exchange, 503, "loading the delta '" + pending->first.model + "' failed: " + error);
          start(std::move(pending->first), std::move(pending->second), who, exchange, id,
                [store, id] { store->release(id); });
        });
  } catch (const UnknownDelta&) {
    send_error(exchange, 404, "the model '" + pending->first.model + "' does not exist; served: " + served_names(),
               "model");
  }
}

void
ApiServer::start(ApiRequest api, std::vector<TokenId> prompt, const ResponseIdentity& who,
                 const std::shared_ptr<http::Exchange>& exchange, std::int32_t variant, std::function<void()> release) {
  Engine& engine = *m_engine.load();
  api.generation.variant = variant;
  std::string prompt_text; // what echo returns: the prompt as sent, or its ids decoded
  if (api.echo) {
    const auto* text = std::get_if<std::string>(&api.prompt);
    prompt_text = text != nullptr ? *text : m_model.tokenizer->decode(prompt, false);
  }
  const TokenId first_prompt_token = prompt.empty() ? 0 : prompt.front();
  auto generation = std::make_shared<Generation>(engine, *m_metrics, *m_model.tokenizer, api, who, exchange,
                                                 std::move(prompt_text), first_prompt_token);
  const bool stream = api.stream;
  // The delta store's hold ends with the engine's last word on the last choice.
  auto remaining = std::make_shared<std::atomic<int>>(api.n);
  const auto one_ended = [remaining, release] {
    if (remaining->fetch_sub(1) == 1 && release)
      release();
  };
  std::vector<RequestId> ids;
  {
    // The sinks may run before submit returns: they wait on this lock until the stream's head is
    // out and the ids are known. submit() validates first, so a request that cannot run is a 400.
    auto mutex = std::make_shared<std::mutex>();
    const std::lock_guard lock(*mutex);
    const auto refuse = [&](int status, const std::string& message) {
      generation->abandon();
      for (const auto id : ids)
        engine.cancel(id);
      for (int i = static_cast<int>(ids.size()); i < api.n; ++i) // never submitted
        one_ended();
      send_error(exchange, status, message);
    };
    for (int i = 0; i < api.n; ++i) {
      GenerationParams params = api.generation;
      if (params.seeded) // vLLM's seeds for n choices: seed + index
        params.sampling.seed += static_cast<std::uint64_t>(i);
      std::vector<TokenId> tokens = i + 1 == api.n ? std::move(prompt) : prompt;
      try {
        ids.push_back(
            engine.submit(std::move(tokens), params, [generation, mutex, one_ended, i](const StepOutput& out) {
              const std::lock_guard guard(*mutex);
              generation->on_output(i, out);
              if (out.finish != FinishReason::none) // the engine's last word on it
                one_ended();
            }));
      } catch (const InputError& e) {
        return refuse(400, e.what());
      } catch (const RuntimeFailure& e) { // the engine is stopping
        return refuse(503, e.what());
      }
    }
    generation->set_ids(ids);
    if (stream)
      generation->begin_stream();
  }
  exchange->on_cancel([&engine, ids] {
    for (const auto id : ids)
      engine.cancel(id);
  });
}

namespace {

// The body of vLLM's adapter routes: an object with string fields.
json
adapter_body(const http::Request& request, std::initializer_list<const char*> required) {
  json body = parse_request_body(request.body);
  if (!body.is_object())
    throw BadRequest("the body must be a JSON object");
  for (const char* field : required)
    if (!body.contains(field) || !body[field].is_string() || body[field].get<std::string>().empty())
      throw BadRequest(std::string("'") + field + "' must be a non-empty string", field);
  return body;
}

} // namespace

void
ApiServer::load_adapter(const http::Request& request, const std::shared_ptr<http::Exchange>& exchange) {
  const json body = adapter_body(request, {"lora_name", "lora_path"});
  const auto& loading = m_options.adapter_loading;
  const std::string name = body["lora_name"].get<std::string>();
  check_adapter_name(loading, name);
  if (name == m_model.name)
    throw BadRequest("'" + name + "' is the base model's name; pick another", "lora_name");
  const auto registered = m_model.deltas->list();
  for (const auto& d : registered)
    if (d.name == name)
      throw BadRequest("a delta named '" + name + "' is already served; unload it first or pick another name",
                       "lora_name");
  const std::filesystem::path dir = confined_adapter_folder(loading, body["lora_path"].get<std::string>());
  if (!reserve_adapter_load(loading.max_adapters))
    throw BadRequest("the server holds " + std::to_string(loading.max_adapters) +
                         " adapters, its --max-adapters; unload one first",
                     "lora_name");
  // Loaded and checked against the base on the store's thread before the 200; serving goes on.
  const auto timeout = loading.load_timeout;
  const auto answer = [this, name, exchange, timeout](const AddOutcome& outcome) {
    --m_loads_in_flight;
    if (outcome.timed_out)
      return send_error(exchange, 504,
                        fmt::format("loading adapter '{}' took longer than the server's --adapter-load-timeout of "
                                    "{:g} s; it was abandoned and nothing was registered",
                                    name, std::chrono::duration<double>(timeout).count()),
                        "lora_path");
    if (outcome.id < 0)
      return send_error(exchange, 400, outcome.error, "lora_path");
    m_metrics->name_variant(outcome.id, name);
    exchange->respond(200, "text/plain; charset=utf-8", "Success: LoRA adapter '" + name + "' added successfully.");
  };
  m_model.deltas->add_async(name, dir, std::chrono::steady_clock::now() + timeout, answer);
}

bool
ApiServer::reserve_adapter_load(std::size_t max_adapters) {
  // A small request is handled on the I/O thread, a large one on the bulk lane, so two loads may
  // ask at once: the slot is taken by compare-and-swap. A load that ends adds to the registered
  // deltas before it leaves the in-flight count, so reading the count first never undercounts.
  while (true) {
    std::size_t in_flight = m_loads_in_flight.load();
    if (m_model.deltas->list().size() + in_flight >= max_adapters)
      return false;
    if (m_loads_in_flight.compare_exchange_strong(in_flight, in_flight + 1))
      return true;
  }
}

void
ApiServer::unload_adapter(const http::Request& request, const std::shared_ptr<http::Exchange>& exchange) {
  const json body = adapter_body(request, {"lora_name"});
  const std::string name = body["lora_name"].get<std::string>();
  try {
    m_model.deltas->remove(name);
  } catch (const UnknownDelta& e) {
    return send_error(exchange, 404, e.what(), "lora_name");
  }
  exchange->respond(200, "text/plain; charset=utf-8", "Success: LoRA adapter '" + name + "' removed successfully.");
}

} // namespace optkit::serve
