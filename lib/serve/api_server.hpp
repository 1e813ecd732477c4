// The OpenAI-compatible routes of serve-deltas over lib/http: /v1/completions and
// /v1/chat/completions (streamed or not), /v1/models, /tokenize, /detokenize, /metrics, /health
// (503 until the engine is attached), /version, and vLLM's /v1/load_lora_adapter and
// /v1/unload_lora_adapter for deltas registered while serving; an API key on every route but
// /health; OpenAI error bodies.
#pragma once

#include "http/server.hpp"
#include "model/chat_template.hpp"
#include "model/tokenizer.hpp"
#include "serve/adapter_loading.hpp"
#include "serve/delta_store.hpp"
#include "serve/engine.hpp"
#include "serve/metrics.hpp"
#include "serve/openai_protocol.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <string>

namespace optkit::serve {

struct ServedVariant {
  std::string name; // what clients put in "model"
  std::string root; // the delta folder
  std::int32_t id = -1;
};

struct ServedModel {
  std::string name;                    // what clients put in "model" for the base
  std::string root;                    // the model folder
  std::vector<ServedVariant> variants; // fixed variants (--baseline swap)
  DeltaStore* deltas = nullptr;        // deltas served beside the base, registered while serving too
  std::shared_ptr<const model::Tokenizer> tokenizer;
  std::optional<model::ChatTemplate> chat_template; // none: chat requests are refused with 400
  std::int64_t max_model_len = 0;
  // The engine's effective settings, as resolved at load (defaults filled in): served under
  // "engine" by /version once the model is attached, so a tuner records them, not its request.
  nlohmann::json settings = nlohmann::json::object();
};

struct ApiOptions {
  std::string api_key; // empty: no key required
  std::string version;
  AdapterLoading adapter_loading; // the load/unload routes: absent unless enabled
};

class ApiServer {
public:
  // Listens at once (so /health can answer 503 while the model loads).
  ApiServer(http::ServerOptions http, ApiOptions options);
  ~ApiServer();
  int port() const { return m_http.port(); }
  void start() { m_http.start(); }
  // The engine and model are ready: generation routes open. Both must outlive the server.
  void attach(Engine& engine, ServedModel model);
  // Stops accepting, lets streams finish for `grace`, cancels the rest.
  void stop(std::chrono::milliseconds grace, const std::function<bool()>& cut_grace_short = {}) {
    m_http.stop(grace, cut_grace_short);
  }

private:
  void handle(const http::Request& request, const std::shared_ptr<http::Exchange>& exchange);
  void generate(Endpoint endpoint, const http::Request& request, const std::shared_ptr<http::Exchange>& exchange);
  // Submits a parsed request for `variant`; `release` (may be empty) runs once it has ended.
  void start(ApiRequest api, std::vector<TokenId> prompt, const ResponseIdentity& who,
             const std::shared_ptr<http::Exchange>& exchange, std::int32_t variant, std::function<void()> release);
  void load_adapter(const http::Request& request, const std::shared_ptr<http::Exchange>& exchange);
  void unload_adapter(const http::Request& request, const std::shared_ptr<http::Exchange>& exchange);
  // Takes one of the --max-adapters slots for a load (false when none is free); the load's answer frees it.
  bool reserve_adapter_load(std::size_t max_adapters);
  std::string served_names() const;

  ApiOptions m_options;
  std::atomic<Engine*> m_engine{nullptr};
  std::atomic<std::size_t> m_loads_in_flight{0}; // adapter loads posted, not yet answered
  ServedModel m_model;
  std::unique_ptr<ServeMetrics> m_metrics;
  http::Server m_http;
};

} // namespace optkit::serve
