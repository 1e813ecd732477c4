// optkit serve-deltas — an OpenAI-compatible server over optkit's runtime with continuous batching.
#include "app_context.hpp"
#include "number_checks.hpp"

#include "core/byte_size.hpp"
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "serve/serve_run.hpp"

#include <csignal>
#include <cstdio>

namespace optkit::cmd {

namespace {

struct ServeFlags {
  std::string base, name, host = "127.0.0.1", api_key, kv_cache_memory, delta_memory, max_memory, baseline = "none",
                          device = "cpu", delta_activations = "int8", activations;
  std::vector<std::string> deltas, loras;
  int port = 8000, max_num_seqs = 256, max_deltas = 0;
  std::int64_t max_num_batched_tokens = 2048;
  unsigned threads = 0;
  double shutdown_grace_s = 5;
  double adapter_load_timeout_s = 120;
  bool mock = false;
  bool prefix_caching = false;
  bool no_mmap = false;
  serve::AdapterLoading adapter_loading;
  double mock_step_ms = 0;
};

// --delta, --lora and how the variants are served and loaded.
void
add_variant_options(CLI::App& serve, ServeFlags& flags) {
  serve.add_option("--delta", flags.deltas,
                   "NAME=DIR: a delta of --base (optkit compress delta) served beside it as model NAME; repeatable");
  serve.add_option("--lora", flags.loras,
                   "NAME=DIR: a PEFT LoRA adapter of --base (adapter_config.json, adapter_model.safetensors) served "
                   "beside it as model NAME; repeatable");
  serve
      .add_option("--max-deltas", flags.max_deltas,
                  "most distinct deltas active in one engine step (0: no cap); see man optkit-serve-deltas")
      ->check(number_range(0, 1 << 20))
      ->capture_default_str();
  serve.add_option("--delta-memory", flags.delta_memory,
                   "host memory for resident deltas, e.g. 2GiB; beyond it the least recently used idle delta is "
                   "evicted and reloaded from disk on demand (default: no limit)");
  serve
      .add_option("--baseline", flags.baseline,
                  "swap: serve each --delta as a whole model, one loaded at a time (the swap-full-model baseline "
                  "DeltaZip is measured against; a --delta may then be a checkpoint folder, loaded as it is); "
                  "none: decoupled serving")
      ->check(CLI::IsMember({"none", "swap"}))
      ->capture_default_str();
  serve
      .add_option("--delta-activations", flags.delta_activations,
                  "int8: the deltas' products take activations quantized to int8 per token, on the packed "
                  "Δs where the CPU has AVX2 or AVX512_VNNI + AVX512_VBMI (decode several times faster); fp32: the "
                  "merged model's products to fp32 rounding")
      ->check(CLI::IsMember({"int8", "fp32"}))
      ->capture_default_str();
  serve.add_flag("--enable-adapter-loading", flags.adapter_loading.enabled,
                 "open POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's runtime adapter routes) for "
                 "folders under --adapter-root; without it they do not exist");
  serve.add_option("--adapter-root", flags.adapter_loading.root,
                   "the folder runtime-loaded adapters must lie in (links out of it are refused)");
  serve
      .add_option("--max-adapters", flags.adapter_loading.max_adapters,
                  "most deltas and adapters registered at once; runtime loads beyond it are refused")
      ->check(number_range(1, 1 << 16))
      ->capture_default_str();
  serve
      .add_option("--adapter-load-timeout", flags.adapter_load_timeout_s,
                  "seconds a runtime adapter load may take (queued behind others included) before it is "
                  "abandoned and answered 504")
      ->check(number_range(0.001, 86400.0))
      ->capture_default_str();
}

// Where it listens, who may call it and how it stops.
void
add_server_options(CLI::App& serve, ServeFlags& flags) {
  serve.add_option("--served-model-name", flags.name, "the name clients send as \"model\" (default: the folder's)");
  serve.add_option("--host", flags.host, "address to bind")->capture_default_str();
  serve.add_option("--port", flags.port, "port to bind (0: a free one, printed on stderr)")
      ->check(number_range(0, 65535))
      ->capture_default_str();
  serve.add_option("--api-key", flags.api_key, "require 'Authorization: Bearer KEY' (default: $OPTKIT_API_KEY)")
      ->envname("OPTKIT_API_KEY");
  serve
      .add_option("--shutdown-grace", flags.shutdown_grace_s,
                  "seconds streams in flight may take to finish after SIGTERM or Ctrl-C")
      ->check(number_range(0.0, 3600.0))
      ->capture_default_str();
}

// The engine, its memory and where the step runs.
void
add_engine_options(CLI::App& serve, ServeFlags& flags) {
  add_max_memory_option(serve, flags.max_memory,
                        "the KV cache gets what is left after the mapped weights, --delta-memory, a step's "
                        "activations and the process");
  serve.add_option("--max-num-seqs", flags.max_num_seqs, "most sequences in one engine step")
      ->check(number_range(1, 1 << 20))
      ->capture_default_str();
  serve
      .add_option("--max-num-batched-tokens", flags.max_num_batched_tokens,
                  "most tokens in one engine step (prompt chunks and decodes together)")
      ->check(number_range(std::int64_t{1}, std::int64_t{1} << 30))
      ->capture_default_str();
  serve.add_option("--kv-cache-memory", flags.kv_cache_memory,
                   "KV cache budget, e.g. 2GiB (default: max-num-seqs full contexts, at most 4 GiB)");
  serve.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", flags.prefix_caching,
                 "keep full KV blocks after their request ends and reuse them for prompts that start with the same "
                 "tokens of the same model (vLLM's automatic prefix caching; default: off)");
  serve.add_flag("--mock", flags.mock,
                 "compute nothing: emit a fixed token cycle through the real engine and HTTP path (overhead "
                 "measurements, a stand-in server for tests)");
  serve.add_option("--mock-step-ms", flags.mock_step_ms, "with --mock: each engine step lasts this long")
      ->check(number_range(0.0, 60000.0))
      ->capture_default_str();
  serve
      .add_option("--device", flags.device,
                  "cpu, or cuda[:N]: the whole step on that GPU (BF16 weights, paged KV cache in device "
                  "memory, the deltas' SBMM)")
      ->capture_default_str();
  add_threads_option(serve, flags.threads);
  add_activations_option(serve, flags.activations);
  add_no_mmap_flag(serve, flags.no_mmap);
}

// The library's options from the flags (and the settings for --activations).
serve::ServeOptions
serve_options(const ServeFlags& flags, AppContext& ctx) {
  serve::ServeOptions options;
  options.base = flags.base;
  options.served_model_name = flags.name;
  for (const auto& d : flags.deltas)
    options.deltas.push_back(serve::parse_named_path(d, "--delta"));
  for (const auto& l : flags.loras)
    options.loras.push_back(serve::parse_named_path(l, "--lora"));
  if (flags.baseline == "swap")
    options.delta_serving = serve::DeltaServing::swap;
  options.host = flags.host;
  options.port = flags.port;
  options.api_key = flags.api_key;
  if (flags.adapter_loading.enabled && flags.adapter_loading.root.empty())
    throw InputError("--enable-adapter-loading needs --adapter-root DIR, the folder adapters are "
                     "loaded from");
  options.adapter_loading = flags.adapter_loading;
  options.adapter_loading.load_timeout =
      std::chrono::milliseconds(static_cast<long>(flags.adapter_load_timeout_s * 1000));
  options.engine.max_num_seqs = flags.max_num_seqs;
  options.engine.max_num_batched_tokens = flags.max_num_batched_tokens;
  options.engine.max_deltas = flags.max_deltas;
  if (!flags.kv_cache_memory.empty())
    options.kv_cache_bytes = parse_byte_size(flags.kv_cache_memory, "--kv-cache-memory");
  options.max_memory = parse_max_memory(flags.max_memory);
  if (!flags.delta_memory.empty())
    options.delta_memory_bytes = parse_byte_size(flags.delta_memory, "--delta-memory");
  options.threads = flags.threads;
  options.device = serve::parse_device(flags.device, "--device");
  options.int8_delta_activations = flags.delta_activations == "int8";
  options.activations = resolve_activations(flags.activations, ctx.settings);
  options.weights = flags.no_mmap ? model::LoadMode::read : model::LoadMode::map;
  options.prefix_caching = flags.prefix_caching;
  options.mock = flags.mock;
  options.mock_step = std::chrono::microseconds(static_cast<long>(flags.mock_step_ms * 1000));
  options.shutdown_grace = std::chrono::milliseconds(static_cast<long>(flags.shutdown_grace_s * 1000));
  return options;
}

} // namespace

void
register_serve_deltas(CLI::App& app, CommandRegistry& commands) {
  CLI::App* serve =
      app.add_subcommand("serve-deltas", "Serve a model over an OpenAI-compatible HTTP API with continuous batching");
  auto flags = std::make_shared<ServeFlags>();
  serve->add_option("--base", flags->base, "model folder (config.json, *.safetensors, tokenizer.json) or GGUF file")
      ->required();
  add_variant_options(*serve, *flags);
  add_server_options(*serve, *flags);
  add_engine_options(*serve, *flags);
  commands.add({"serve-deltas", serve, [flags](AppContext& ctx) {
                  const auto options = serve_options(*flags, ctx);
                  const auto summary = serve::run_serve(options, ctx.run_context(0), [&](int port) {
                    std::fprintf(stderr, "optkit serve-deltas: listening on http://%s:%d\n", flags->host.c_str(), port);
                    std::fflush(stderr);
                  });
                  std::fprintf(
                      stderr,
                      "optkit serve-deltas: stopped after %lld engine steps; tokens: %lld prompt, %lld generated\n",
                      static_cast<long long>(summary.stats.steps), static_cast<long long>(summary.stats.prompt_tokens),
                      static_cast<long long>(summary.stats.generated_tokens));
                  if (summary.signal == SIGINT)
                    throw Interrupted("serve-deltas: interrupted");
                }});
}

} // namespace optkit::cmd
