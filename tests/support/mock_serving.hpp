// serve-deltas' whole HTTP path over the mock model of testdata's tiny-base, in process: the
// engine and the API server the perf programs load (no model computation, instant engine steps).
#pragma once

#include "http/server.hpp"
#include "model/model_config.hpp"
#include "model/tokenizer.hpp"
#include "runtime/kv_cache.hpp"
#include "serve/api_server.hpp"
#include "serve/engine.hpp"
#include "serve/mock_model.hpp"

#include <chrono>
#include <filesystem>
#include <memory>

namespace optkit::test {

// Started and attached on construction; stopped on destruction.
struct MockServing {
  MockServing(const std::filesystem::path& base, http::ServerOptions http)
      : config(model::load_model_config(base))
      , tokenizer(std::make_shared<const model::Tokenizer>(model::Tokenizer::load_folder(base)))
      , mock(mock_model(config, *tokenizer))
      , engine(std::move(mock), mock_kv, {256, 2048})
      , server(std::move(http), {}) {
    server.start();
    server.attach(engine,
                  {"tiny-base", base.string(), {}, nullptr, tokenizer, std::nullopt, config.max_position_embeddings});
  }
  ~MockServing() {
    server.stop(std::chrono::seconds(1));
    engine.stop();
  }
  int port() const { return server.port(); }

  model::ModelConfig config;
  std::shared_ptr<const model::Tokenizer> tokenizer;
  std::unique_ptr<serve::MockModel> mock;             // handed to the engine, after:
  const runtime::KvCache& mock_kv = mock->kv_cache(); // (members start in this order)
  serve::Engine engine;
  serve::ApiServer server;

private:
  static std::unique_ptr<serve::MockModel> mock_model(const model::ModelConfig& config,
                                                      const model::Tokenizer& tokenizer) {
    runtime::KvCacheOptions kv_options;
    kv_options.budget_bytes = std::uint64_t{64} << 20;
    return std::make_unique<serve::MockModel>(config, tokenizer.encode(" a b c d", false), std::chrono::microseconds(0),
                                              kv_options);
  }
};

} // namespace optkit::test
