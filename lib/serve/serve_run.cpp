#include "serve/serve_run.hpp"

#include "core/build_info.hpp"
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "core/log.hpp"
#include "core/text.hpp"
#include "model/gguf_model.hpp"
#include "runtime/kv_cache.hpp"
#include "serve/api_server.hpp"
#include "serve/delta_store.hpp"
#include "serve/model_loader.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <thread>

namespace optkit::serve {

std::pair<std::string, std::filesystem::path>
parse_named_path(const std::string& text, const std::string& flag) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw InputError(flag + " '" + text + "': expected NAME=DIR");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

int
parse_device(const std::string& text, const std::string& flag) {
  if (text == "cpu")
    return -1;
  if (text == "cuda")
    return 0;
  if (text.starts_with("cuda:")) {
    const std::string index = text.substr(5);
    if (!index.empty() && index.size() <= 4 && std::all_of(index.begin(), index.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c)) != 0;
        }))
      return std::stoi(index);
  }
  throw InputError(flag + " '" + text + "': expected cpu, cuda or cuda:N (N: a device index as nvidia-smi lists them)");
}

ServeSummary
run_serve(const ServeOptions& options, const archive::RunContext& context,
          const std::function<void(int)>& on_listening) {
  const bool gguf = model::is_gguf_model(options.base);
  if (!std::filesystem::is_directory(options.base) && !gguf)
    throw InputError("--base " + options.base.string() + ": no such model folder or GGUF file");
  if (gguf && (!options.deltas.empty() || !options.loras.empty() || options.adapter_loading.enabled))
    throw InputError("--base " + options.base.string() +
                     ": deltas and LoRA adapters are served beside a Hugging Face model folder, not a GGUF file");
  install_interrupt_handlers();
  http::ServerOptions http;
  http.host = options.host;
  http.port = options.port;
  http.max_body_bytes = options.max_body_bytes;
  http.bulk_body_bytes = options.bulk_body_bytes;
  http.threads = 1;
  ApiOptions api;
  api.api_key = options.api_key;
  api.adapter_loading = options.adapter_loading;
  if (api.adapter_loading.enabled && !std::filesystem::is_directory(api.adapter_loading.root))
    throw InputError("--adapter-root " + api.adapter_loading.root.string() +
                     ": no such folder (--enable-adapter-loading reads adapters from it only)");
  api.version = build_info().version;
  ApiServer server(http, api); // listening now: /health answers 503 while the model loads
  ServeSummary summary;
  summary.port = server.port();
  server.start();
  log::info("serve-deltas: listening on http://{}:{} (loading {})", options.host, summary.port, options.base.string());
  if (on_listening)
    on_listening(summary.port);

  auto tokenizer = std::make_shared<const model::Tokenizer>(model::Tokenizer::load_folder(options.base));
  LoadedModel loaded = load_served_model(options, *tokenizer);
  const runtime::KvCache& kv = *loaded.kv;
  Engine engine(std::move(loaded.model), kv, loaded.engine);
  const auto& variants = loaded.variants;
  const std::string base_name = !options.served_model_name.empty() ? options.served_model_name
                                : !options.base.filename().empty() ? options.base.filename().string()
                                                                   : options.base.parent_path().filename().string();
  // Declared after the engine: it goes first.
  const std::unique_ptr<DeltaStore> deltas = serve_beside(options, loaded, engine, base_name);

  ServedModel served;
  served.name = base_name;
  served.root = options.base.string();
  served.variants = variants;
  served.deltas = deltas.get();
  for (const auto& v : variants)
    if (v.name == served.name)
      throw InputError("--delta " + v.name + "=...: the name is the base model's; pick another");
  served.tokenizer = tokenizer;
  served.max_model_len = engine.config().max_position_embeddings;
  served.settings = {
      {"max_num_seqs", loaded.engine.max_num_seqs},
      {"max_num_batched_tokens", loaded.engine.max_num_batched_tokens},
      {"max_deltas", loaded.engine.max_deltas},
      {"threads", loaded.threads > 0 ? nlohmann::json(loaded.threads) : nlohmann::json(nullptr)},
      {"device", loaded.device_name.empty() ? nlohmann::json("cpu") : nlohmann::json(loaded.device_name)},
      {"kv_cache_bytes", static_cast<std::uint64_t>(kv.capacity_blocks().value_or(0)) * kv.block_bytes()},
      {"kv_cache_blocks", kv.capacity_blocks().value_or(0)},
      {"block_tokens", kv.block_tokens()},
      {"enable_prefix_caching", kv.prefix_caching()},
      {"max_model_len", served.max_model_len},
      {"mock", options.mock}};
  try {
    served.chat_template = model::load_chat_template(options.base);
  } catch (const InputError& e) {
    log::warn("serve-deltas: {}; /v1/chat/completions will answer 400", e.what());
  }
  server.attach(engine, served);
  log::info("serve-deltas: serving '{}'{} ({} KV blocks of {} tokens)", served.name, options.mock ? " (mock)" : "",
            kv.capacity_blocks().value_or(0), kv.block_tokens());

  while (!interrupt_requested())
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  summary.signal = interrupt_signal();
  log::info("serve-deltas: stopping (signal {}), finishing streams for up to {} ms", summary.signal,
            options.shutdown_grace.count());
  // A second signal, now or during the grace, cuts it short.
  server.stop(options.shutdown_grace, [] { return interrupt_count() > 1; });
  engine.stop();
  summary.stats = engine.stats();
  if (context.recording()) {
    const auto& st = summary.stats;
    auto& archive = *context.archive;
    archive.transaction([&] {
      const auto metric = [&](const char* name, double value, const char* unit) {
        archive.add_metric(context.run_id, std::nullopt, {name, value, unit, {}});
      };
      metric("engine_steps", double(st.steps), "steps");
      metric("prompt_tokens", double(st.prompt_tokens), "tokens");
      metric("generated_tokens", double(st.generated_tokens), "tokens");
      metric("preemptions", double(st.preemptions), "sequences");
      if (st.prefix_caching) {
        metric("prefix_cache_queries", double(st.prefix_cache_queries), "tokens");
        metric("prefix_cache_hits", double(st.prefix_cache_hits), "tokens");
      }
      metric("variants", double(options.deltas.size()), "deltas");
      if (deltas) {
        const auto store = deltas->stats();
        metric("delta_loads", double(store.loads), "loads");
        metric("delta_evictions", double(store.evictions), "evictions");
        metric("delta_load_time", store.load_seconds, "s");
      }
      if (loaded.swap) {
        metric("model_swaps", double(loaded.swap->swaps()), "swaps");
        metric("model_swap_time", loaded.swap->swap_seconds(), "s");
      }
      metric("port", double(summary.port), "");
    });
  }
  return summary;
}

} // namespace optkit::serve
