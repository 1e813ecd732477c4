// `optkit serve-deltas`: loads the base model, starts the engine and the OpenAI-compatible
// server, and serves until SIGTERM or Ctrl-C, then stops gracefully (in-flight streams get a
// grace period, then are cancelled).
#pragma once

#include "archive/run_context.hpp"
#include "model/safetensors.hpp"
#include "runtime/activation_precision.hpp"
#include "serve/adapter_loading.hpp"
#include "serve/engine.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace optkit::serve {

// How deltas are served: decoupled beside one shared base (DeltaZip), or as whole merged models
// swapped in one at a time (the baseline DeltaZip measures itself against; --baseline swap).
enum class DeltaServing { decoupled, swap };

struct ServeOptions {
  std::filesystem::path base;
  std::string served_model_name; // default: the folder's name
  // Deltas of the base (optkit compress delta) served beside it, decoupled, by these names.
  std::vector<std::pair<std::string, std::filesystem::path>> deltas;
  // PEFT LoRA adapters of the base served beside it the same way (decoupled serving only).
  std::vector<std::pair<std::string, std::filesystem::path>> loras;
  DeltaServing delta_serving = DeltaServing::decoupled;
  std::uint64_t delta_memory_bytes = 0; // host budget of resident deltas (0: none); LRU eviction beyond it
  std::string host = "127.0.0.1";
  int port = 8000; // 0: a free port (reported on stderr and through on_listening)
  std::string api_key;
  AdapterLoading adapter_loading; // --enable-adapter-loading, --adapter-root, --max-adapters
  EngineOptions engine;
  std::uint64_t kv_cache_bytes = 0; // 0: room for max_num_seqs full contexts, at most 4 GiB
  // --max-memory: the KV budget is what is left of it after the mapped weights, the deltas' budget,
  // a step's activations and the process; refused at start when nothing (or not the given
  // --kv-cache-memory) is left (model/memory_needs.hpp).
  std::optional<std::uint64_t> max_memory;
  bool prefix_caching = false;        // --enable-prefix-caching (runtime/kv_cache.hpp)
  unsigned threads = 0;               // runtime threads (0: one per available CPU)
  bool int8_delta_activations = true; // --delta-activations int8 (runtime::RuntimeOptions)
  // How BF16 weights multiply activations (--activations; runtime/activation_precision.hpp).
  runtime::ActivationPrecision activations = runtime::ActivationPrecision::fp32;
  model::LoadMode weights = model::LoadMode::map; // --no-mmap: read (model/safetensors.hpp)
  int device = -1;                                // a CUDA device for the whole step (--device cuda[:N]); −1: the CPU
  std::size_t max_body_bytes = std::size_t{32} << 20;
  // Bodies this large are parsed and tokenized on the server's low-priority bulk lane, one at a
  // time, never on the I/O thread that answers every other request (http::ServerOptions).
  std::size_t bulk_body_bytes = std::size_t{64} << 10;
  std::chrono::milliseconds shutdown_grace{5000};
  // No model computation: MockModel with the --base folder's config and tokenizer, each engine
  // step lasting mock_step (the server's own overhead, and a stand-in engine for bench's tests).
  bool mock = false;
  std::chrono::microseconds mock_step{0};
};

struct ServeSummary {
  int port = 0;
  int signal = 0; // what stopped it
  EngineStats stats;
};

// Parses "NAME=DIR" of --delta. Throws InputError naming the flag.
std::pair<std::string, std::filesystem::path> parse_named_path(const std::string& text, const std::string& flag);
// Parses --device: "cpu" → −1, "cuda" → 0, "cuda:N" → N. Throws InputError naming the flag.
int parse_device(const std::string& text, const std::string& flag);

// Serves until an interrupt; `on_listening(port)` runs once the port is bound (before loading).
// When `context` is recording, the summary at shutdown (requests by outcome, tokens, preemptions,
// variants) goes to its run.
ServeSummary run_serve(const ServeOptions& options, const archive::RunContext& context,
                       const std::function<void(int)>& on_listening = {});

} // namespace optkit::serve
